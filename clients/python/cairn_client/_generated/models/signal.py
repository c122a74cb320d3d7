from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Signal")


@_attrs_define
class Signal:
    """
    Attributes:
        id (str):
        run_id (UUID):
        name (str):
        payload (Any): Any JSON.
        sent_at (datetime.datetime):
        sent_by (str | Unset):
        consumed_at (datetime.datetime | Unset): When a step's commit consumed it; absent while buffered.
        consumed_by (list[int] | Unset): The step and attempt that consumed it.
    """

    id: str
    run_id: UUID
    name: str
    payload: Any
    sent_at: datetime.datetime
    sent_by: str | Unset = UNSET
    consumed_at: datetime.datetime | Unset = UNSET
    consumed_by: list[int] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        run_id = str(self.run_id)

        name = self.name

        payload = self.payload

        sent_at = self.sent_at.isoformat()

        sent_by = self.sent_by

        consumed_at: str | Unset = UNSET
        if not isinstance(self.consumed_at, Unset):
            consumed_at = self.consumed_at.isoformat()

        consumed_by: list[int] | Unset = UNSET
        if not isinstance(self.consumed_by, Unset):
            consumed_by = self.consumed_by

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "run_id": run_id,
                "name": name,
                "payload": payload,
                "sent_at": sent_at,
            }
        )
        if sent_by is not UNSET:
            field_dict["sent_by"] = sent_by
        if consumed_at is not UNSET:
            field_dict["consumed_at"] = consumed_at
        if consumed_by is not UNSET:
            field_dict["consumed_by"] = consumed_by

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        run_id = UUID(d.pop("run_id"))

        name = d.pop("name")

        payload = d.pop("payload")

        sent_at = datetime.datetime.fromisoformat(d.pop("sent_at"))

        sent_by = d.pop("sent_by", UNSET)

        _consumed_at = d.pop("consumed_at", UNSET)
        consumed_at: datetime.datetime | Unset
        if isinstance(_consumed_at, Unset):
            consumed_at = UNSET
        else:
            consumed_at = datetime.datetime.fromisoformat(_consumed_at)

        consumed_by = cast(list[int], d.pop("consumed_by", UNSET))

        signal = cls(
            id=id,
            run_id=run_id,
            name=name,
            payload=payload,
            sent_at=sent_at,
            sent_by=sent_by,
            consumed_at=consumed_at,
            consumed_by=consumed_by,
        )

        signal.additional_properties = d
        return signal

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
