from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CrewUpgradeRequest")


@_attrs_define
class CrewUpgradeRequest:
    """
    Attributes:
        to (str): A version of the crew this server loaded.
        run (None | Unset | UUID): Only this run.
        dry_run (bool | Unset): Say what would move; change nothing.
        force (bool | Unset): Also move runs whose only differences leave them readable: a new kind for a step the run
            has finished (recorded as overridden). Never a renamed started step, a new kind for the step the run is inside,
            a removed started step or a cursor past the new last step (those runs are reported with `fork_from`), nor a
            running or ended run.
        by (None | str | Unset): A note on who asked, kept on the event as `note`: the actor recorded is the token's
            principal (`api` for a token of `CAIRN_API_TOKENS`), never this.
        reason (None | str | Unset):
    """

    to: str
    run: None | Unset | UUID = UNSET
    dry_run: bool | Unset = UNSET
    force: bool | Unset = UNSET
    by: None | str | Unset = UNSET
    reason: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        to = self.to

        run: None | str | Unset
        if isinstance(self.run, Unset):
            run = UNSET
        elif isinstance(self.run, UUID):
            run = str(self.run)
        else:
            run = self.run

        dry_run = self.dry_run

        force = self.force

        by: None | str | Unset
        if isinstance(self.by, Unset):
            by = UNSET
        else:
            by = self.by

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "to": to,
            }
        )
        if run is not UNSET:
            field_dict["run"] = run
        if dry_run is not UNSET:
            field_dict["dry_run"] = dry_run
        if force is not UNSET:
            field_dict["force"] = force
        if by is not UNSET:
            field_dict["by"] = by
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        to = d.pop("to")

        def _parse_run(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                run_type_0 = UUID(data)

                return run_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        run = _parse_run(d.pop("run", UNSET))

        dry_run = d.pop("dry_run", UNSET)

        force = d.pop("force", UNSET)

        def _parse_by(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        by = _parse_by(d.pop("by", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        crew_upgrade_request = cls(
            to=to,
            run=run,
            dry_run=dry_run,
            force=force,
            by=by,
            reason=reason,
        )

        return crew_upgrade_request
