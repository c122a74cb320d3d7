from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="Published")


@_attrs_define
class Published:
    """
    Attributes:
        key (str):
        value (Any): Any JSON.
        idx (int): The step that published it.
        attempt (int):
        at (datetime.datetime):
    """

    key: str
    value: Any
    idx: int
    attempt: int
    at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        value = self.value

        idx = self.idx

        attempt = self.attempt

        at = self.at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "key": key,
                "value": value,
                "idx": idx,
                "attempt": attempt,
                "at": at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        key = d.pop("key")

        value = d.pop("value")

        idx = d.pop("idx")

        attempt = d.pop("attempt")

        at = datetime.datetime.fromisoformat(d.pop("at"))

        published = cls(
            key=key,
            value=value,
            idx=idx,
            attempt=attempt,
            at=at,
        )

        published.additional_properties = d
        return published

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
