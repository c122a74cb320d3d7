from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ChildOf")


@_attrs_define
class ChildOf:
    """Where a child run hangs: the run whose `children` step started it.

    Attributes:
        parent_run_id (UUID):
        step_idx (int): The parent's `children` step.
        attempt (int): The attempt of that step that started it.
        key (str): Its key: the index of its element for `over`, or the key a fixed list gives.
        depth (int): 1 for a child of a top-level run.
    """

    parent_run_id: UUID
    step_idx: int
    attempt: int
    key: str
    depth: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        parent_run_id = str(self.parent_run_id)

        step_idx = self.step_idx

        attempt = self.attempt

        key = self.key

        depth = self.depth

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "parent_run_id": parent_run_id,
                "step_idx": step_idx,
                "attempt": attempt,
                "key": key,
                "depth": depth,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        parent_run_id = UUID(d.pop("parent_run_id"))

        step_idx = d.pop("step_idx")

        attempt = d.pop("attempt")

        key = d.pop("key")

        depth = d.pop("depth")

        child_of = cls(
            parent_run_id=parent_run_id,
            step_idx=step_idx,
            attempt=attempt,
            key=key,
            depth=depth,
        )

        child_of.additional_properties = d
        return child_of

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
