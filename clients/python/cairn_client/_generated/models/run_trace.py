from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="RunTrace")


@_attrs_define
class RunTrace:
    """The run's trace, when it is traced (docs/tracing.md): `trace_id` (32 hex; a run nobody called has its own id without
    dashes), `parent` (16 hex: the caller's span, or the parent run's span for a child; absent for a root), `sampled`.
    Absent for a run submitted without tracing.

        Attributes:
            trace_id (str):
            sampled (bool):
            parent (str | Unset):
    """

    trace_id: str
    sampled: bool
    parent: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        trace_id = self.trace_id

        sampled = self.sampled

        parent = self.parent

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "trace_id": trace_id,
                "sampled": sampled,
            }
        )
        if parent is not UNSET:
            field_dict["parent"] = parent

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        trace_id = d.pop("trace_id")

        sampled = d.pop("sampled")

        parent = d.pop("parent", UNSET)

        run_trace = cls(
            trace_id=trace_id,
            sampled=sampled,
            parent=parent,
        )

        run_trace.additional_properties = d
        return run_trace

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
