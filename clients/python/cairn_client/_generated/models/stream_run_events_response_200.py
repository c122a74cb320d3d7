from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="StreamRunEventsResponse200")


@_attrs_define
class StreamRunEventsResponse200:
    """One Server-Sent Event as a client parses it: `id` is the event's `seq`, `event` its `kind`, and `data` the JSON text
    of an `Event` (see components.schemas.Event).

        Attributes:
            id (str | Unset):
            event (str | Unset):
            data (str | Unset):
    """

    id: str | Unset = UNSET
    event: str | Unset = UNSET
    data: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        event = self.event

        data = self.data

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if id is not UNSET:
            field_dict["id"] = id
        if event is not UNSET:
            field_dict["event"] = event
        if data is not UNSET:
            field_dict["data"] = data

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id", UNSET)

        event = d.pop("event", UNSET)

        data = d.pop("data", UNSET)

        stream_run_events_response_200 = cls(
            id=id,
            event=event,
            data=data,
        )

        stream_run_events_response_200.additional_properties = d
        return stream_run_events_response_200

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
