from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ThreadSummary")


@_attrs_define
class ThreadSummary:
    """
    Attributes:
        thread_id (str):
        runs (int): Runs in the thread, whatever their status.
        input_tokens (int): Input tokens reported by the steps of those runs.
        output_tokens (int): Output tokens reported by the steps of those runs.
        last_run_at (datetime.datetime): When the thread's newest run was submitted.
        cost_usd (float | Unset): What the priced model calls of the thread's steps cost, in US dollars. Absent when
            none was priced.
    """

    thread_id: str
    runs: int
    input_tokens: int
    output_tokens: int
    last_run_at: datetime.datetime
    cost_usd: float | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        thread_id = self.thread_id

        runs = self.runs

        input_tokens = self.input_tokens

        output_tokens = self.output_tokens

        last_run_at = self.last_run_at.isoformat()

        cost_usd = self.cost_usd

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "thread_id": thread_id,
                "runs": runs,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "last_run_at": last_run_at,
            }
        )
        if cost_usd is not UNSET:
            field_dict["cost_usd"] = cost_usd

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        thread_id = d.pop("thread_id")

        runs = d.pop("runs")

        input_tokens = d.pop("input_tokens")

        output_tokens = d.pop("output_tokens")

        last_run_at = datetime.datetime.fromisoformat(d.pop("last_run_at"))

        cost_usd = d.pop("cost_usd", UNSET)

        thread_summary = cls(
            thread_id=thread_id,
            runs=runs,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            last_run_at=last_run_at,
            cost_usd=cost_usd,
        )

        thread_summary.additional_properties = d
        return thread_summary

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
