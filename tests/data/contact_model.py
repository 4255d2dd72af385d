"""The Pydantic source of the shape in contact.yaml and contact.json."""

import enum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class Tag(str, enum.Enum):
    VIP = "vip"
    NEW = "new"


class Address(BaseModel):
    city: str = Field(description="City")
    zip: int = 0


class Contact(BaseModel):
    """A contact card"""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "x-kor-examples": [
                {
                    "text": "Ann Lee (work) ann@example.com, +47 22 00 00 00, Oslo",
                    "output": {
                        "name": "Ann Lee",
                        "email": "ann@example.com",
                        "phones": ["+47 22 00 00 00"],
                        "kind": "work",
                        "address": {"city": "Oslo"},
                    },
                }
            ]
        },
    )

    name: str = Field(description="Full name", min_length=1)
    email: str | None = Field(description="Email address", json_schema_extra={"format": "email"})
    phones: list[Annotated[str, Field(pattern="^[0-9+ -]+$")]] = Field(
        default_factory=list, description="Phone numbers", max_length=3
    )
    kind: Literal["friend", "work"] = Field(description="Relationship")
    score: float | None = Field(None, ge=0, lt=10)
    address: Address = Field(description="Postal address")
    tags: set[Tag] = Field(default_factory=set)
