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

T = TypeVar("T", bound="OnDeadlineFail")


@_attrs_define
class OnDeadlineFail:
    """`outcome: "fail"`. The run fails (error kind `deadline`).

    Attributes:
        outcome (Literal['fail']):
    """

    outcome: Literal["fail"]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        outcome = self.outcome

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "outcome": outcome,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        outcome = cast(Literal["fail"], d.pop("outcome"))
        if outcome != "fail":
            raise ValueError(f"outcome must match const 'fail', got '{outcome}'")

        on_deadline_fail = cls(
            outcome=outcome,
        )

        on_deadline_fail.additional_properties = d
        return on_deadline_fail

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
