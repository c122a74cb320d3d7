from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ErrorResponseErrorOpenWaitType0")


@_attrs_define
class ErrorResponseErrorOpenWaitType0:
    """`wait_closed` only: the open wait of the same run (`id`, `kind`, `step_idx`), the one a person most likely meant (a
    rejected review's re-run opens a new one); `null` when the run has none.

        Attributes:
            id (UUID | Unset):
            kind (str | Unset):
            step_idx (int | Unset):
    """

    id: UUID | Unset = UNSET
    kind: str | Unset = UNSET
    step_idx: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id: str | Unset = UNSET
        if not isinstance(self.id, Unset):
            id = str(self.id)

        kind = self.kind

        step_idx = self.step_idx

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if id is not UNSET:
            field_dict["id"] = id
        if kind is not UNSET:
            field_dict["kind"] = kind
        if step_idx is not UNSET:
            field_dict["step_idx"] = step_idx

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        _id = d.pop("id", UNSET)
        id: UUID | Unset
        if isinstance(_id, Unset):
            id = UNSET
        else:
            id = UUID(_id)

        kind = d.pop("kind", UNSET)

        step_idx = d.pop("step_idx", UNSET)

        error_response_error_open_wait_type_0 = cls(
            id=id,
            kind=kind,
            step_idx=step_idx,
        )

        error_response_error_open_wait_type_0.additional_properties = d
        return error_response_error_open_wait_type_0

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
