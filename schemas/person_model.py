"""Pydantic twin of schemas/person.yaml: `kor-cli extract schemas/person_model.py:Person ...`.

Examples sit under `x-kor-examples` in `json_schema_extra`, on the model (whole values)
or on a field (that field's value), as in JSON Schema files.
"""

from pydantic import BaseModel, ConfigDict, Field


class Person(BaseModel):
    """A person mentioned in the text"""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kor-examples": [
                {
                    "text": "Bob Smith is 42 and lives in Leeds.",
                    "output": {"name": "Bob Smith", "age": 42, "city": "Leeds"},
                },
                {"text": "The weather in Paris is lovely today.", "output": {}},
            ]
        }
    )

    name: str = Field(
        description="The person's full name",
        json_schema_extra={
            "x-kor-examples": [{"text": "My name is Ada Lovelace.", "output": "Ada Lovelace"}]
        },
    )
    age: int = Field(description="Age in years", ge=0, le=150)
    city: str = Field(description="The city where the person lives")
