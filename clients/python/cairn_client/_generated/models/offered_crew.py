from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="OfferedCrew")


@_attrs_define
class OfferedCrew:
    """A crew version a process offers.

    Attributes:
        name (str):
        version (str):
        fingerprint (str):
        needs_code (bool): It has Rust agents: only processes offering it execute its runs.
    """

    name: str
    version: str
    fingerprint: str
    needs_code: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        version = self.version

        fingerprint = self.fingerprint

        needs_code = self.needs_code

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "version": version,
                "fingerprint": fingerprint,
                "needs_code": needs_code,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        version = d.pop("version")

        fingerprint = d.pop("fingerprint")

        needs_code = d.pop("needs_code")

        offered_crew = cls(
            name=name,
            version=version,
            fingerprint=fingerprint,
            needs_code=needs_code,
        )

        offered_crew.additional_properties = d
        return offered_crew

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
