from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.audit_entry_via import AuditEntryVia
from ..types import UNSET, Unset

T = TypeVar("T", bound="AuditEntry")


@_attrs_define
class AuditEntry:
    """
    Attributes:
        id (int): Counts up in the order entries were stored; page with `after`.
        at (datetime.datetime):
        principal (str):
        via (AuditEntryVia): The channel: `local` is direct database access, which no policy binds.
        action (str): An event's kind (`run_retried`, `wait_answered`, `run_submitted`…), or `principal_added`,
            `principal_disabled`, `token_rotated`.
        detail (Any): The event's payload, or the change's details.
        token (str | Unset): The token's public id (`env-N` for the N-th of `CAIRN_API_TOKENS`).
        client (str | Unset): The client's address as the server saw it.
        run_id (UUID | Unset):
        wait_id (UUID | Unset):
    """

    id: int
    at: datetime.datetime
    principal: str
    via: AuditEntryVia
    action: str
    detail: Any
    token: str | Unset = UNSET
    client: str | Unset = UNSET
    run_id: UUID | Unset = UNSET
    wait_id: UUID | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        id = self.id

        at = self.at.isoformat()

        principal = self.principal

        via = self.via.value

        action = self.action

        detail = self.detail

        token = self.token

        client = self.client

        run_id: str | Unset = UNSET
        if not isinstance(self.run_id, Unset):
            run_id = str(self.run_id)

        wait_id: str | Unset = UNSET
        if not isinstance(self.wait_id, Unset):
            wait_id = str(self.wait_id)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "at": at,
                "principal": principal,
                "via": via,
                "action": action,
                "detail": detail,
            }
        )
        if token is not UNSET:
            field_dict["token"] = token
        if client is not UNSET:
            field_dict["client"] = client
        if run_id is not UNSET:
            field_dict["run_id"] = run_id
        if wait_id is not UNSET:
            field_dict["wait_id"] = wait_id

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        id = d.pop("id")

        at = datetime.datetime.fromisoformat(d.pop("at"))

        principal = d.pop("principal")

        via = AuditEntryVia(d.pop("via"))

        action = d.pop("action")

        detail = d.pop("detail")

        token = d.pop("token", UNSET)

        client = d.pop("client", UNSET)

        _run_id = d.pop("run_id", UNSET)
        run_id: UUID | Unset
        if isinstance(_run_id, Unset):
            run_id = UNSET
        else:
            run_id = UUID(_run_id)

        _wait_id = d.pop("wait_id", UNSET)
        wait_id: UUID | Unset
        if isinstance(_wait_id, Unset):
            wait_id = UNSET
        else:
            wait_id = UUID(_wait_id)

        audit_entry = cls(
            id=id,
            at=at,
            principal=principal,
            via=via,
            action=action,
            detail=detail,
            token=token,
            client=client,
            run_id=run_id,
            wait_id=wait_id,
        )

        audit_entry.additional_properties = d
        return audit_entry

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
