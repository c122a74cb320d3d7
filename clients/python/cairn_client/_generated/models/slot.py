from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.slot_outcome import SlotOutcome
from ..types import UNSET, Unset

T = TypeVar("T", bound="Slot")


@_attrs_define
class Slot:
    """
    Attributes:
        schedule (str):
        slot (datetime.datetime):
        outcome (SlotOutcome):
        at (datetime.datetime): When it was decided.
        run_id (UUID | Unset):
    """

    schedule: str
    slot: datetime.datetime
    outcome: SlotOutcome
    at: datetime.datetime
    run_id: UUID | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        schedule = self.schedule

        slot = self.slot.isoformat()

        outcome = self.outcome.value

        at = self.at.isoformat()

        run_id: str | Unset = UNSET
        if not isinstance(self.run_id, Unset):
            run_id = str(self.run_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "schedule": schedule,
                "slot": slot,
                "outcome": outcome,
                "at": at,
            }
        )
        if run_id is not UNSET:
            field_dict["run_id"] = run_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        schedule = d.pop("schedule")

        slot = datetime.datetime.fromisoformat(d.pop("slot"))

        outcome = SlotOutcome(d.pop("outcome"))

        at = datetime.datetime.fromisoformat(d.pop("at"))

        _run_id = d.pop("run_id", UNSET)
        run_id: UUID | Unset
        if isinstance(_run_id, Unset):
            run_id = UNSET
        else:
            run_id = UUID(_run_id)

        slot = cls(
            schedule=schedule,
            slot=slot,
            outcome=outcome,
            at=at,
            run_id=run_id,
        )

        slot.additional_properties = d
        return slot

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
