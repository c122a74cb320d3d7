from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="RetryRequest")


@_attrs_define
class RetryRequest:
    """Who acts and why, recorded on the retry's event, and whether a `children` step starts every child again. Optional,
    as is every field.

        Example:
            {'by': 'ops@example.com', 'reason': 'fixed the upstream outage', 'rerun_children': False}

        Attributes:
            by (None | str | Unset): A note on who asked, kept on the event as `note`: the actor recorded is the token's
                principal (`api` for a token of `CAIRN_API_TOKENS`), never this.
            reason (None | str | Unset): Why.
            rerun_children (bool | None | Unset): A `children` step starts every child again (`cairn runs retry --rerun-
                children`). Default: the children that succeeded at its earlier attempts are kept (`children_reused`) and only
                the others start.
    """

    by: None | str | Unset = UNSET
    reason: None | str | Unset = UNSET
    rerun_children: bool | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
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

        rerun_children: bool | None | Unset
        if isinstance(self.rerun_children, Unset):
            rerun_children = UNSET
        else:
            rerun_children = self.rerun_children

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if by is not UNSET:
            field_dict["by"] = by
        if reason is not UNSET:
            field_dict["reason"] = reason
        if rerun_children is not UNSET:
            field_dict["rerun_children"] = rerun_children

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

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

        def _parse_rerun_children(data: object) -> bool | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(bool | None | Unset, data)

        rerun_children = _parse_rerun_children(d.pop("rerun_children", UNSET))

        retry_request = cls(
            by=by,
            reason=reason,
            rerun_children=rerun_children,
        )

        return retry_request
