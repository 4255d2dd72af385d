"""Node tree → Kor's TypeScript-style type description (a pure string function).

Byte for byte what Kor's `TypeScriptDescriptor` writes for what Kor can express:

    ```TypeScript

    person: { // A person
     name: string // Full name
     tags: Array<string> // Hobbies
     pets: Array<{ // Their pets
      kind: "dog" | "cat" // Species
     }>
    }
    ```

(`// ` is always written, so an empty description leaves a trailing space; integers are
`number`, as in Kor.) Beyond Kor: `?` after the name of an optional field and `| null`
after the type of a nullable one.
"""

from __future__ import annotations

from kor_cli.schema.nodes import Node

_SCALARS = {"text": "string", "number": "number", "integer": "number", "boolean": "boolean"}


def render_typescript(root: Node) -> str:
    """The fenced TypeScript block for the root object."""
    return "```TypeScript\n\n" + "\n".join(_lines(root, 0, is_root=True)) + "\n```\n"


def _lines(node: Node, depth: int, *, is_root: bool = False) -> list[str]:
    indent = " " * depth
    optional = not (is_root or node.required) and node.required_stated
    name = f"{node.id}?" if optional else node.id
    null = " | null" if node.nullable else ""
    if node.type == "object":
        opening, closing = ("Array<{", "}>") if node.many else ("{", "}")
        lines = [f"{indent}{name}: {opening} // {node.description}"]
        for child in node.attributes:
            lines.extend(_lines(child, depth + 1))
        return [*lines, f"{indent}{closing}{null}"]
    if node.type == "selection":
        value = " | ".join(f'"{option.id}"' for option in node.options)
    else:
        value = _SCALARS[node.type]
    if node.many:
        value = f"Array<{value}>"
    return [f"{indent}{name}: {value}{null} // {node.description}"]
