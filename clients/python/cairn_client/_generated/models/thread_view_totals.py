from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ThreadViewTotals")


@_attrs_define
class ThreadViewTotals:
    """
    Attributes:
        runs (int):
        input_tokens (int):
        output_tokens (int):
        cost_usd (float | Unset): What the priced model calls of the thread's steps cost, in US dollars. Absent when
            none was priced.
    """

    runs: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        runs = self.runs

        input_tokens = self.input_tokens

        output_tokens = self.output_tokens

        cost_usd = self.cost_usd

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "runs": runs,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
            }
        )
        if cost_usd is not UNSET:
            field_dict["cost_usd"] = cost_usd

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        runs = d.pop("runs")

        input_tokens = d.pop("input_tokens")

        output_tokens = d.pop("output_tokens")

        cost_usd = d.pop("cost_usd", UNSET)

        thread_view_totals = cls(
            runs=runs,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd,
        )

        thread_view_totals.additional_properties = d
        return thread_view_totals

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
