from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Event")


@_attrs_define
class Event:
    """
    Attributes:
        run_id (UUID):
        seq (int): Counts from 1 per run.
        at (datetime.datetime):
        kind (str): run_submitted, run_claimed, step_succeeded, step_failed, step_retry_scheduled, run_succeeded,
            run_failed, crew_forced, run_retried, run_continued, run_cancel_requested, step_cancelled, run_cancelled,
            run_forked, context_added, wait_opened, wait_answered, wait_expired, model_called, tool_executed,
            step_interrupted, transcript_repaired, children_spawned, children_joined, children_reused, step_deferred,
            key_paused, key_resumed, budget_raised, budget_warning, crew_upgraded, run_blocked, usage_reported,
            child_interrupted, model_call_sent, … (more may be added). Operator actions' `data` carries `by` and `reason`;
            `wait_answered` carries the answer and `by`; `context_added` the `context` and the input values it `replaced`.
        data (Any): Kind-specific details.
    """

    run_id: UUID
    seq: int
    at: datetime.datetime
    kind: str
    data: Any
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        run_id = str(self.run_id)

        seq = self.seq

        at = self.at.isoformat()

        kind = self.kind

        data = self.data

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "run_id": run_id,
                "seq": seq,
                "at": at,
                "kind": kind,
                "data": data,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        run_id = UUID(d.pop("run_id"))

        seq = d.pop("seq")

        at = datetime.datetime.fromisoformat(d.pop("at"))

        kind = d.pop("kind")

        data = d.pop("data")

        event = cls(
            run_id=run_id,
            seq=seq,
            at=at,
            kind=kind,
            data=data,
        )

        event.additional_properties = d
        return event

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
