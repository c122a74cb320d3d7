from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.principal_role import PrincipalRole
from ..types import UNSET, Unset

T = TypeVar("T", bound="PrincipalIssued")


@_attrs_define
class PrincipalIssued:
    """
    Attributes:
        name (str): 1 to 64 ASCII letters, digits, `.`, `_`, `-` or `@`.
        role (PrincipalRole):
        groups (list[str]): What approver policies name as `group:NAME`.
        tenants (list[str]): The tenants it may submit as; empty: any.
        token_id (str): The public part of its current token (`cairn_<token_id>_…`), which the audit names.
        created_at (datetime.datetime):
        created_by (str):
        token (str): The token, shown this once; only its digest is stored.
        disabled_at (datetime.datetime | Unset): When it was disabled; its token and sessions no longer work.
        email (str | Unset): Where its notices are mailed (with `CAIRN_SMTP_URL`).
    """

    name: str
    role: PrincipalRole
    groups: list[str]
    tenants: list[str]
    token_id: str
    created_at: datetime.datetime
    created_by: str
    token: str
    disabled_at: datetime.datetime | Unset = UNSET
    email: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        role = self.role.value

        groups = self.groups

        tenants = self.tenants

        token_id = self.token_id

        created_at = self.created_at.isoformat()

        created_by = self.created_by

        token = self.token

        disabled_at: str | Unset = UNSET
        if not isinstance(self.disabled_at, Unset):
            disabled_at = self.disabled_at.isoformat()

        email = self.email

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "role": role,
                "groups": groups,
                "tenants": tenants,
                "token_id": token_id,
                "created_at": created_at,
                "created_by": created_by,
                "token": token,
            }
        )
        if disabled_at is not UNSET:
            field_dict["disabled_at"] = disabled_at
        if email is not UNSET:
            field_dict["email"] = email

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        role = PrincipalRole(d.pop("role"))

        groups = cast(list[str], d.pop("groups"))

        tenants = cast(list[str], d.pop("tenants"))

        token_id = d.pop("token_id")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        created_by = d.pop("created_by")

        token = d.pop("token")

        _disabled_at = d.pop("disabled_at", UNSET)
        disabled_at: datetime.datetime | Unset
        if isinstance(_disabled_at, Unset):
            disabled_at = UNSET
        else:
            disabled_at = datetime.datetime.fromisoformat(_disabled_at)

        email = d.pop("email", UNSET)

        principal_issued = cls(
            name=name,
            role=role,
            groups=groups,
            tenants=tenants,
            token_id=token_id,
            created_at=created_at,
            created_by=created_by,
            token=token,
            disabled_at=disabled_at,
            email=email,
        )

        principal_issued.additional_properties = d
        return principal_issued

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
