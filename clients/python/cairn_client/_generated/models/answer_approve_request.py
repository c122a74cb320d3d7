from __future__ import annotations

from collections.abc import Mapping
from typing import (
    Any,
    Literal,
    Self,
    TypeVar,
    cast,
)

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="AnswerApproveRequest")


@_attrs_define
class AnswerApproveRequest:
    """`decision: "approve"`. Review or approval: yes. With an optional `by`, `reason` and `digest`.

    Attributes:
        decision (Literal['approve']):
        by (None | str | Unset): A note on who asked, kept on the event as `note`: the actor recorded is the token's
            principal (`api` for a token of `CAIRN_API_TOKENS`), never this.
        reason (None | str | Unset): Why (recorded as `reason` on the `wait_answered` event).
        digest (None | str | Unset): The `digest` of what the person was shown (`GET /v1/waits/{id}/ballot`, a notice's
            `data.digest`): an answer that quotes another digest than the wait's is refused (409 `stale_digest`) and nothing
            is stored.
    """

    decision: Literal["approve"]
    by: None | str | Unset = UNSET
    reason: None | str | Unset = UNSET
    digest: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        decision = self.decision

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

        digest: None | str | Unset
        if isinstance(self.digest, Unset):
            digest = UNSET
        else:
            digest = self.digest

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "decision": decision,
            }
        )
        if by is not UNSET:
            field_dict["by"] = by
        if reason is not UNSET:
            field_dict["reason"] = reason
        if digest is not UNSET:
            field_dict["digest"] = digest

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        decision = cast(Literal["approve"], d.pop("decision"))
        if decision != "approve":
            raise ValueError(f"decision must match const 'approve', got '{decision}'")

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

        def _parse_digest(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        digest = _parse_digest(d.pop("digest", UNSET))

        answer_approve_request = cls(
            decision=decision,
            by=by,
            reason=reason,
            digest=digest,
        )

        return answer_approve_request
