from __future__ import annotations

from collections.abc import Mapping
from typing import (
    Any,
    Literal,
    Self,
    TypeVar,
    cast,
)

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="AnswerEdit")


@_attrs_define
class AnswerEdit:
    """`decision: "edit"`. Review: commit this output instead.

    Attributes:
        decision (Literal['edit']):
        output (Any): The output to commit instead (any JSON).
    """

    decision: Literal["edit"]
    output: Any
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        decision = self.decision

        output = self.output

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "decision": decision,
                "output": output,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        decision = cast(Literal["edit"], d.pop("decision"))
        if decision != "edit":
            raise ValueError(f"decision must match const 'edit', got '{decision}'")

        output = d.pop("output")

        answer_edit = cls(
            decision=decision,
            output=output,
        )

        answer_edit.additional_properties = d
        return answer_edit

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
