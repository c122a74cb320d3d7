from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ForkRequest")


@_attrs_define
class ForkRequest:
    """
    Example:
        {'from_step': 1, 'by': 'ops@example.com', 'reason': 'try the new writer prompt'}

    Attributes:
        from_step (int): Steps `0..from_step` are copied; the fork executes from this step. At most the source's
            `cursor` (its succeeded steps). A number with no fractional part (`1.0`) is an integer too.
        input_ (Any | Unset): A new run input, only with `from_step = 0`. Absent or null: the source run's input.
        thread_id (None | str | Unset): The fork's thread. Absent or null: the source run's thread. A conversation
            thread: an opaque string of 1 to 256 bytes of UTF-8 (`maxLength` counts characters; the server counts bytes)
            with no NUL character (anything else is 400 `bad_thread_id`, and nothing is stored).
        crew_version (None | str | Unset): Another version of the run's crew for the fork to run on (a version, or the
            start of a fingerprint; one this server loaded, else one stored): a run that cannot move, forked from its last
            compatible step. Refused (409 `crew_incompatible`, nothing stored) unless the copied steps keep their roles and
            kinds in it; recorded on the fork as `crew_upgraded`. Absent or null: the source run's version.
        rerun_children (bool | None | Unset): A `children` step the fork runs again starts every child anew (`cairn runs
            fork --rerun-children`). Default: each child of the source run's same step that succeeded with the same key,
            crew version and input is kept as a copy in the fork (`children_reused`) and only the others start.
        by (None | str | Unset): A note on who asked, kept on the event as `note`: the actor recorded is the token's
            principal (`api` for a token of `CAIRN_API_TOKENS`), never this.
        reason (None | str | Unset): Why.
    """

    from_step: int
    input_: Any | Unset = UNSET
    thread_id: None | str | Unset = UNSET
    crew_version: None | str | Unset = UNSET
    rerun_children: bool | None | Unset = UNSET
    by: None | str | Unset = UNSET
    reason: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from_step = self.from_step

        input_ = self.input_

        thread_id: None | str | Unset
        if isinstance(self.thread_id, Unset):
            thread_id = UNSET
        else:
            thread_id = self.thread_id

        crew_version: None | str | Unset
        if isinstance(self.crew_version, Unset):
            crew_version = UNSET
        else:
            crew_version = self.crew_version

        rerun_children: bool | None | Unset
        if isinstance(self.rerun_children, Unset):
            rerun_children = UNSET
        else:
            rerun_children = self.rerun_children

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
                "from_step": from_step,
            }
        )
        if input_ is not UNSET:
            field_dict["input"] = input_
        if thread_id is not UNSET:
            field_dict["thread_id"] = thread_id
        if crew_version is not UNSET:
            field_dict["crew_version"] = crew_version
        if rerun_children is not UNSET:
            field_dict["rerun_children"] = rerun_children
        if by is not UNSET:
            field_dict["by"] = by
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        from_step = d.pop("from_step")

        input_ = d.pop("input", UNSET)

        def _parse_thread_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        thread_id = _parse_thread_id(d.pop("thread_id", UNSET))

        def _parse_crew_version(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        crew_version = _parse_crew_version(d.pop("crew_version", UNSET))

        def _parse_rerun_children(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        rerun_children = _parse_rerun_children(d.pop("rerun_children", UNSET))

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

        fork_request = cls(
            from_step=from_step,
            input_=input_,
            thread_id=thread_id,
            crew_version=crew_version,
            rerun_children=rerun_children,
            by=by,
            reason=reason,
        )

        return fork_request
