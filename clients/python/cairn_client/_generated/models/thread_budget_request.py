from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.budget import Budget


T = TypeVar("T", bound="ThreadBudgetRequest")


@_attrs_define
class ThreadBudgetRequest:
    """Exactly one of `set` and `raise` (400 `bad_body` otherwise).

    Attributes:
        set_ (Budget | Unset): Limits on a run's model use, counted from its journal (a resumed run never counts a call
            twice). An absent limit is no limit.
        raise_ (Budget | Unset): Limits on a run's model use, counted from its journal (a resumed run never counts a
            call twice). An absent limit is no limit.
        by (str | Unset): A note on who asked, kept on the event as `note`: the actor recorded is the token's principal
            (`api` for a token of `CAIRN_API_TOKENS`), never this.
        reason (str | Unset):
    """

    set_: Budget | Unset = UNSET
    raise_: Budget | Unset = UNSET
    by: str | Unset = UNSET
    reason: str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        set_: dict[str, Any] | Unset = UNSET
        if not isinstance(self.set_, Unset):
            set_ = self.set_.to_dict()

        raise_: dict[str, Any] | Unset = UNSET
        if not isinstance(self.raise_, Unset):
            raise_ = self.raise_.to_dict()

        by = self.by

        reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if set_ is not UNSET:
            field_dict["set"] = set_
        if raise_ is not UNSET:
            field_dict["raise"] = raise_
        if by is not UNSET:
            field_dict["by"] = by
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.budget import Budget

        d = dict(src_dict)
        _set_ = d.pop("set", UNSET)
        set_: Budget | Unset
        if isinstance(_set_, Unset):
            set_ = UNSET
        else:
            set_ = Budget.from_dict(_set_)

        _raise_ = d.pop("raise", UNSET)
        raise_: Budget | Unset
        if isinstance(_raise_, Unset):
            raise_ = UNSET
        else:
            raise_ = Budget.from_dict(_raise_)

        by = d.pop("by", UNSET)

        reason = d.pop("reason", UNSET)

        thread_budget_request = cls(
            set_=set_,
            raise_=raise_,
            by=by,
            reason=reason,
        )

        return thread_budget_request
