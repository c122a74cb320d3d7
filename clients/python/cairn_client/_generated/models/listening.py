from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="Listening")


@_attrs_define
class Listening:
    """
    Attributes:
        run_id (UUID):
        idx (int):
        attempt (int):
        names (list[str]):
        opened_at (datetime.datetime):
        deadline (datetime.datetime | Unset): Its timeout; absent: none.
    """

    run_id: UUID
    idx: int
    attempt: int
    names: list[str]
    opened_at: datetime.datetime
    deadline: datetime.datetime | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        run_id = str(self.run_id)

        idx = self.idx

        attempt = self.attempt

        names = self.names

        opened_at = self.opened_at.isoformat()

        deadline: str | Unset = UNSET
        if not isinstance(self.deadline, Unset):
            deadline = self.deadline.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "run_id": run_id,
                "idx": idx,
                "attempt": attempt,
                "names": names,
                "opened_at": opened_at,
            }
        )
        if deadline is not UNSET:
            field_dict["deadline"] = deadline

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        run_id = UUID(d.pop("run_id"))

        idx = d.pop("idx")

        attempt = d.pop("attempt")

        names = cast(list[str], d.pop("names"))

        opened_at = datetime.datetime.fromisoformat(d.pop("opened_at"))

        _deadline = d.pop("deadline", UNSET)
        deadline: datetime.datetime | Unset
        if isinstance(_deadline, Unset):
            deadline = UNSET
        else:
            deadline = datetime.datetime.fromisoformat(_deadline)

        listening = cls(
            run_id=run_id,
            idx=idx,
            attempt=attempt,
            names=names,
            opened_at=opened_at,
            deadline=deadline,
        )

        listening.additional_properties = d
        return listening

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
