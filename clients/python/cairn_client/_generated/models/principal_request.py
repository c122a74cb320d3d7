from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.principal_request_role import PrincipalRequestRole
from ..types import UNSET, Unset

T = TypeVar("T", bound="PrincipalRequest")


@_attrs_define
class PrincipalRequest:
    """
    Attributes:
        name (str):
        role (PrincipalRequestRole):
        groups (list[str] | Unset):
        tenants (list[str] | Unset):
        email (str | Unset): Where its notices are mailed: one `@`, a domain with a dot (`bad_principal` otherwise).
    """

    name: str
    role: PrincipalRequestRole
    groups: list[str] | Unset = UNSET
    tenants: list[str] | Unset = UNSET
    email: str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        role = self.role.value

        groups: list[str] | Unset = UNSET
        if not isinstance(self.groups, Unset):
            groups = self.groups

        tenants: list[str] | Unset = UNSET
        if not isinstance(self.tenants, Unset):
            tenants = self.tenants

        email = self.email

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "role": role,
            }
        )
        if groups is not UNSET:
            field_dict["groups"] = groups
        if tenants is not UNSET:
            field_dict["tenants"] = tenants
        if email is not UNSET:
            field_dict["email"] = email

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        role = PrincipalRequestRole(d.pop("role"))

        groups = cast(list[str], d.pop("groups", UNSET))

        tenants = cast(list[str], d.pop("tenants", UNSET))

        email = d.pop("email", UNSET)

        principal_request = cls(
            name=name,
            role=role,
            groups=groups,
            tenants=tenants,
            email=email,
        )

        return principal_request
