from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="RunViewSpent")


@_attrs_define
class RunViewSpent:
    """What the run has spent, counted as its budget counts: tokens and model calls from its finished responses, tool calls
    from its executed tools. Absent for a run without a budget (its own or its crew's).

        Attributes:
            tokens (int | Unset):
            input_tokens (int | Unset):
            output_tokens (int | Unset):
            model_calls (int | Unset):
            tool_calls (int | Unset):
            wall_time (int | Unset): Seconds from the run's submission to its end, or to now.
            cost_usd (float | Unset): US dollars of the run's priced model calls (0 where no process priced them).
    """

    tokens: int | Unset = UNSET
    input_tokens: int | Unset = UNSET
    output_tokens: int | Unset = UNSET
    model_calls: int | Unset = UNSET
    tool_calls: int | Unset = UNSET
    wall_time: int | Unset = UNSET
    cost_usd: float | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        tokens = self.tokens

        input_tokens = self.input_tokens

        output_tokens = self.output_tokens

        model_calls = self.model_calls

        tool_calls = self.tool_calls

        wall_time = self.wall_time

        cost_usd = self.cost_usd

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if tokens is not UNSET:
            field_dict["tokens"] = tokens
        if input_tokens is not UNSET:
            field_dict["input_tokens"] = input_tokens
        if output_tokens is not UNSET:
            field_dict["output_tokens"] = output_tokens
        if model_calls is not UNSET:
            field_dict["model_calls"] = model_calls
        if tool_calls is not UNSET:
            field_dict["tool_calls"] = tool_calls
        if wall_time is not UNSET:
            field_dict["wall_time"] = wall_time
        if cost_usd is not UNSET:
            field_dict["cost_usd"] = cost_usd

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        tokens = d.pop("tokens", UNSET)

        input_tokens = d.pop("input_tokens", UNSET)

        output_tokens = d.pop("output_tokens", UNSET)

        model_calls = d.pop("model_calls", UNSET)

        tool_calls = d.pop("tool_calls", UNSET)

        wall_time = d.pop("wall_time", UNSET)

        cost_usd = d.pop("cost_usd", UNSET)

        run_view_spent = cls(
            tokens=tokens,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            model_calls=model_calls,
            tool_calls=tool_calls,
            wall_time=wall_time,
            cost_usd=cost_usd,
        )

        run_view_spent.additional_properties = d
        return run_view_spent

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
