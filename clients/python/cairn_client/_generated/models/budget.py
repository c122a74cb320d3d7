from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="Budget")


@_attrs_define
class Budget:
    """Limits on a run's model use, counted from its journal (a resumed run never counts a call twice). An absent limit is
    no limit.

        Attributes:
            tokens (int | Unset): Input plus output tokens of every model call of the run.
            input_tokens (int | Unset): Input tokens alone: a call whose input (estimated) would pass it is not made.
            output_tokens (int | Unset): Output tokens alone: no call is made once they are spent.
            model_calls (int | Unset): Model calls (finished responses) of the run.
            tool_calls (int | Unset): Tool executions (journaled results) of the run; a tool the budget is spent for is not
                executed.
            wall_time (int | Unset): Seconds since the run was submitted, checked before each step and each model call: a
                step or call that would start later is not started (the run is interrupted with `budget_exceeded`); a running
                step is not stopped.
            cost_usd (float | Unset): US dollars of the run's model calls, each priced when it finishes by the price table
                of the process that made it (`CAIRN_PRICES`; cache reads and writes at their own rates). A call whose input
                alone would pass what is left is not made; a run with this limit makes no call to a model the process cannot
                price (it is interrupted with `budget_exceeded`).
    """

    tokens: int | Unset = UNSET
    input_tokens: int | Unset = UNSET
    output_tokens: int | Unset = UNSET
    model_calls: int | Unset = UNSET
    tool_calls: int | Unset = UNSET
    wall_time: int | Unset = UNSET
    cost_usd: float | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        tokens = self.tokens

        input_tokens = self.input_tokens

        output_tokens = self.output_tokens

        model_calls = self.model_calls

        tool_calls = self.tool_calls

        wall_time = self.wall_time

        cost_usd = self.cost_usd

        field_dict: dict[str, Any] = {}

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

        budget = cls(
            tokens=tokens,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            model_calls=model_calls,
            tool_calls=tool_calls,
            wall_time=wall_time,
            cost_usd=cost_usd,
        )

        return budget
