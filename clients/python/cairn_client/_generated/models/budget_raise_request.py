from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.budget import Budget


T = TypeVar("T", bound="BudgetRaiseRequest")


@_attrs_define
class BudgetRaiseRequest:
    """
    Attributes:
        raise_ (Budget): Limits on a run's model use, counted from its journal (a resumed run never counts a call
            twice). An absent limit is no limit.
        by (str | Unset): A note on who asked, kept on the event as `note`: the actor recorded is the token's principal
            (`api` for a token of `CAIRN_API_TOKENS`), never this.
        reason (str | Unset):
    """

    raise_: Budget
    by: str | Unset = UNSET
    reason: str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        raise_ = self.raise_.to_dict()

        by = self.by

        reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "raise": raise_,
            }
        )
        if by is not UNSET:
            field_dict["by"] = by
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.budget import Budget

        d = dict(src_dict)
        raise_ = Budget.from_dict(d.pop("raise"))

        by = d.pop("by", UNSET)

        reason = d.pop("reason", UNSET)

        budget_raise_request = cls(
            raise_=raise_,
            by=by,
            reason=reason,
        )

        return budget_raise_request
