from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Approvers")


@_attrs_define
class Approvers:
    """
    Attributes:
        allow (list[str] | Unset): `group:NAME` and `user:NAME`; absent: any operator.
        required (int | Unset): Distinct principals whose approval decides (default 1).
        self_approval (bool | Unset): Whether the run's submitter (or whoever retried, continued or forked it) counts
            (default true).
        one_reject_decides (bool | Unset): Whether one reject decides (default true; else `required` rejects do).
    """

    allow: list[str] | Unset = UNSET
    required: int | Unset = UNSET
    self_approval: bool | Unset = UNSET
    one_reject_decides: bool | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        allow: list[str] | Unset = UNSET
        if not isinstance(self.allow, Unset):
            allow = self.allow

        required = self.required

        self_approval = self.self_approval

        one_reject_decides = self.one_reject_decides

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if allow is not UNSET:
            field_dict["allow"] = allow
        if required is not UNSET:
            field_dict["required"] = required
        if self_approval is not UNSET:
            field_dict["self_approval"] = self_approval
        if one_reject_decides is not UNSET:
            field_dict["one_reject_decides"] = one_reject_decides

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        allow = cast(list[str], d.pop("allow", UNSET))

        required = d.pop("required", UNSET)

        self_approval = d.pop("self_approval", UNSET)

        one_reject_decides = d.pop("one_reject_decides", UNSET)

        approvers = cls(
            allow=allow,
            required=required,
            self_approval=self_approval,
            one_reject_decides=one_reject_decides,
        )

        approvers.additional_properties = d
        return approvers

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
