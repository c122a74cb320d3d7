from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.offered_crew import OfferedCrew


T = TypeVar("T", bound="Worker")


@_attrs_define
class Worker:
    """A process in the registry (an entry of `cairn workers --json`).

    Attributes:
        id (str): Its lease owner.
        host (str):
        pid (int):
        started_at (datetime.datetime):
        beat_at (datetime.datetime): Its last beat.
        expires_at (datetime.datetime): Live until then unless it beats again.
        live (bool):
        offers (list[OfferedCrew]):
        held (int): Runs running under its lease.
    """

    id: str
    host: str
    pid: int
    started_at: datetime.datetime
    beat_at: datetime.datetime
    expires_at: datetime.datetime
    live: bool
    offers: list[OfferedCrew]
    held: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        host = self.host

        pid = self.pid

        started_at = self.started_at.isoformat()

        beat_at = self.beat_at.isoformat()

        expires_at = self.expires_at.isoformat()

        live = self.live

        offers = []
        for offers_item_data in self.offers:
            offers_item = offers_item_data.to_dict()
            offers.append(offers_item)

        held = self.held

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "host": host,
                "pid": pid,
                "started_at": started_at,
                "beat_at": beat_at,
                "expires_at": expires_at,
                "live": live,
                "offers": offers,
                "held": held,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.offered_crew import OfferedCrew

        d = dict(src_dict)
        id = d.pop("id")

        host = d.pop("host")

        pid = d.pop("pid")

        started_at = datetime.datetime.fromisoformat(d.pop("started_at"))

        beat_at = datetime.datetime.fromisoformat(d.pop("beat_at"))

        expires_at = datetime.datetime.fromisoformat(d.pop("expires_at"))

        live = d.pop("live")

        offers = []
        _offers = d.pop("offers")
        for offers_item_data in _offers:
            offers_item = OfferedCrew.from_dict(offers_item_data)

            offers.append(offers_item)

        held = d.pop("held")

        worker = cls(
            id=id,
            host=host,
            pid=pid,
            started_at=started_at,
            beat_at=beat_at,
            expires_at=expires_at,
            live=live,
            offers=offers,
            held=held,
        )

        worker.additional_properties = d
        return worker

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
