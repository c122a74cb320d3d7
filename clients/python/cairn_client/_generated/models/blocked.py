from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Blocked")


@_attrs_define
class Blocked:
    """Why a runnable run waits: its crew version has Rust agents and no live process offers it. Cleared when a process
    offering it claims the run.

        Attributes:
            crew (str):
            version (str):
            fingerprint (str):
            handlers (list[str]): The handlers of its Rust agents: what a process must register.
    """

    crew: str
    version: str
    fingerprint: str
    handlers: list[str]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        crew = self.crew

        version = self.version

        fingerprint = self.fingerprint

        handlers = self.handlers

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "crew": crew,
                "version": version,
                "fingerprint": fingerprint,
                "handlers": handlers,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        crew = d.pop("crew")

        version = d.pop("version")

        fingerprint = d.pop("fingerprint")

        handlers = cast(list[str], d.pop("handlers"))

        blocked = cls(
            crew=crew,
            version=version,
            fingerprint=fingerprint,
            handlers=handlers,
        )

        blocked.additional_properties = d
        return blocked

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
