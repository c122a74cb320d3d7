from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CrewVersion")


@_attrs_define
class CrewVersion:
    """A crew version a run was stored with (an entry of `cairn crews list --json`).

    Attributes:
        name (str):
        version (str):
        fingerprint (str):
        first_seen (datetime.datetime): When a run was first stored with it.
        unfinished (int): Its runs that have not ended: queued, running, waiting, interrupted or failed.
    """

    name: str
    version: str
    fingerprint: str
    first_seen: datetime.datetime
    unfinished: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        version = self.version

        fingerprint = self.fingerprint

        first_seen = self.first_seen.isoformat()

        unfinished = self.unfinished

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "version": version,
                "fingerprint": fingerprint,
                "first_seen": first_seen,
                "unfinished": unfinished,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        version = d.pop("version")

        fingerprint = d.pop("fingerprint")

        first_seen = datetime.datetime.fromisoformat(d.pop("first_seen"))

        unfinished = d.pop("unfinished")

        crew_version = cls(
            name=name,
            version=version,
            fingerprint=fingerprint,
            first_seen=first_seen,
            unfinished=unfinished,
        )

        crew_version.additional_properties = d
        return crew_version

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
