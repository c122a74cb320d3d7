from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.budget import Budget
    from ..models.spent import Spent


T = TypeVar("T", bound="ThreadBudget")


@_attrs_define
class ThreadBudget:
    """A thread's budget: limits on what its runs and their children spend together, checked before each model call of a
    run of the thread (a call with no room stops its run `interrupted`, `budget_exceeded`, naming the thread).

        Attributes:
            thread_id (str):
            budget (Budget): Limits on a run's model use, counted from its journal (a resumed run never counts a call
                twice). An absent limit is no limit.
            spent (Spent): What runs spent, counted as a budget counts it: tokens and model calls from their finished
                responses (and tokens their programs reported), tool calls from their executed tools, dollars as their calls
                were priced.
            set_by (str):
            reason (None | str):
            set_at (datetime.datetime):
    """

    thread_id: str
    budget: Budget
    spent: Spent
    set_by: str
    reason: None | str
    set_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        thread_id = self.thread_id

        budget = self.budget.to_dict()

        spent = self.spent.to_dict()

        set_by = self.set_by

        reason: None | str
        reason = self.reason

        set_at = self.set_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "thread_id": thread_id,
                "budget": budget,
                "spent": spent,
                "set_by": set_by,
                "reason": reason,
                "set_at": set_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.budget import Budget
        from ..models.spent import Spent

        d = dict(src_dict)
        thread_id = d.pop("thread_id")

        budget = Budget.from_dict(d.pop("budget"))

        spent = Spent.from_dict(d.pop("spent"))

        set_by = d.pop("set_by")

        def _parse_reason(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        reason = _parse_reason(d.pop("reason"))

        set_at = datetime.datetime.fromisoformat(d.pop("set_at"))

        thread_budget = cls(
            thread_id=thread_id,
            budget=budget,
            spent=spent,
            set_by=set_by,
            reason=reason,
            set_at=set_at,
        )

        thread_budget.additional_properties = d
        return thread_budget

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
