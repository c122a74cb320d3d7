from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="CompactedRules")


@_attrs_define
class CompactedRules:
    """`runs` by the rule that removes each (each run is counted under one): succeeded or cancelled runs past
    `finished_older_than`, failed runs past `failed_older_than`, a thread's finished runs beyond its newest
    `keep_per_thread`. A dry run says the same of what it would remove.

        Attributes:
            finished (int):
            failed (int):
            beyond_keep (int):
    """

    finished: int
    failed: int
    beyond_keep: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        finished = self.finished

        failed = self.failed

        beyond_keep = self.beyond_keep

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "finished": finished,
                "failed": failed,
                "beyond_keep": beyond_keep,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        finished = d.pop("finished")

        failed = d.pop("failed")

        beyond_keep = d.pop("beyond_keep")

        compacted_rules = cls(
            finished=finished,
            failed=failed,
            beyond_keep=beyond_keep,
        )

        compacted_rules.additional_properties = d
        return compacted_rules

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
