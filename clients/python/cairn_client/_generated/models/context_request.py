from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.context_request_context import ContextRequestContext


T = TypeVar("T", bound="ContextRequest")


@_attrs_define
class ContextRequest:
    """
    Example:
        {'context': {'hint': "the customer's name is Ada"}, 'by': 'ops@example.com', 'reason': 'the first input lacked
            it'}

    Attributes:
        context (ContextRequestContext): Merged into the run's input: its keys replace the input's (a JSON object, as
            the input must be; anything else is 422 `bad_context`).
        by (None | str | Unset): A note on who asked, kept on the event as `note`: the actor recorded is the token's
            principal (`api` for a token of `CAIRN_API_TOKENS`), never this.
        reason (None | str | Unset): Why.
    """

    context: ContextRequestContext
    by: None | str | Unset = UNSET
    reason: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        context = self.context.to_dict()

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
                "context": context,
            }
        )
        if by is not UNSET:
            field_dict["by"] = by
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.context_request_context import ContextRequestContext

        d = dict(src_dict)
        context = ContextRequestContext.from_dict(d.pop("context"))

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

        context_request = cls(
            context=context,
            by=by,
            reason=reason,
        )

        return context_request
