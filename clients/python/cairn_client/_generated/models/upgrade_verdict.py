from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="UpgradeVerdict")


@_attrs_define
class UpgradeVerdict:
    """Whether one unfinished run can move to a crew version, and whether it did (an entry of `cairn runs upgrade --json`).

    Attributes:
        run_id (UUID):
        status (str):
        version (str): The version the run is on.
        cursor (int):
        movable (bool): It can move now (the version keeps the steps it has started, same roles and kinds).
        moved (bool): It moved (never on a dry run).
        reason (str | Unset): Why it cannot move, or what a forced move overrode.
        idx (int | Unset): The step the difference is at.
        already (bool | Unset): Present (true) when it was already on the version when its move came: another upgrade
            moved it first, and this one wrote nothing.
        fork_from (int | Unset): For a run that cannot move: the step a fork onto the version would run from (`POST
            /v1/runs/{id}/fork` with `from_step` and `crew_version`), copying the steps before it.
    """

    run_id: UUID
    status: str
    version: str
    cursor: int
    movable: bool
    moved: bool
    reason: str | Unset = UNSET
    idx: int | Unset = UNSET
    already: bool | Unset = UNSET
    fork_from: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        run_id = str(self.run_id)

        status = self.status

        version = self.version

        cursor = self.cursor

        movable = self.movable

        moved = self.moved

        reason = self.reason

        idx = self.idx

        already = self.already

        fork_from = self.fork_from

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "run_id": run_id,
                "status": status,
                "version": version,
                "cursor": cursor,
                "movable": movable,
                "moved": moved,
            }
        )
        if reason is not UNSET:
            field_dict["reason"] = reason
        if idx is not UNSET:
            field_dict["idx"] = idx
        if already is not UNSET:
            field_dict["already"] = already
        if fork_from is not UNSET:
            field_dict["fork_from"] = fork_from

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        run_id = UUID(d.pop("run_id"))

        status = d.pop("status")

        version = d.pop("version")

        cursor = d.pop("cursor")

        movable = d.pop("movable")

        moved = d.pop("moved")

        reason = d.pop("reason", UNSET)

        idx = d.pop("idx", UNSET)

        already = d.pop("already", UNSET)

        fork_from = d.pop("fork_from", UNSET)

        upgrade_verdict = cls(
            run_id=run_id,
            status=status,
            version=version,
            cursor=cursor,
            movable=movable,
            moved=moved,
            reason=reason,
            idx=idx,
            already=already,
            fork_from=fork_from,
        )

        upgrade_verdict.additional_properties = d
        return upgrade_verdict

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
