"""Pydantic twin of schemas/person.yaml: `kor-cli extract schemas/person_model.py:Person ...`.

Examples sit under `x-kor-examples` in `json_schema_extra`: on the model for whole
values, or on a field (`Field(json_schema_extra=...)`) for that field's value alone.
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
                {
                    "text": "Hello! Ada Lovelace here, 36, writing to you from London.",
                    "output": {"name": "Ada Lovelace", "age": 36, "city": "London"},
                },
                {"text": "The weather in Paris is lovely today.", "output": {}},
            ]
        }
    )

    name: str = Field(description="The person's full name")
    age: int = Field(description="Age in years", ge=0, le=150)
    city: str = Field(description="The city where the person lives")
