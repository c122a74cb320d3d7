from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.run import Run
    from ..models.thread_budget import ThreadBudget
    from ..models.thread_view_totals import ThreadViewTotals


T = TypeVar("T", bound="ThreadView")


@_attrs_define
class ThreadView:
    """
    Attributes:
        thread_id (str):
        runs (list[Run]): The thread's runs, oldest first, as `GET /v1/runs` lists them.
        totals (ThreadViewTotals):
        budget (ThreadBudget | Unset): A thread's budget: limits on what its runs and their children spend together,
            checked before each model call of a run of the thread (a call with no room stops its run `interrupted`,
            `budget_exceeded`, naming the thread).
    """

    thread_id: str
    runs: list[Run]
    totals: ThreadViewTotals
    budget: ThreadBudget | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        thread_id = self.thread_id

        runs = []
        for runs_item_data in self.runs:
            runs_item = runs_item_data.to_dict()
            runs.append(runs_item)

        totals = self.totals.to_dict()

        budget: dict[str, Any] | Unset = UNSET
        if not isinstance(self.budget, Unset):
            budget = self.budget.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "thread_id": thread_id,
                "runs": runs,
                "totals": totals,
            }
        )
        if budget is not UNSET:
            field_dict["budget"] = budget

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.run import Run
        from ..models.thread_budget import ThreadBudget
        from ..models.thread_view_totals import ThreadViewTotals

        d = dict(src_dict)
        thread_id = d.pop("thread_id")

        runs = []
        _runs = d.pop("runs")
        for runs_item_data in _runs:
            runs_item = Run.from_dict(runs_item_data)

            runs.append(runs_item)

        totals = ThreadViewTotals.from_dict(d.pop("totals"))

        _budget = d.pop("budget", UNSET)
        budget: ThreadBudget | Unset
        if isinstance(_budget, Unset):
            budget = UNSET
        else:
            budget = ThreadBudget.from_dict(_budget)

        thread_view = cls(
            thread_id=thread_id,
            runs=runs,
            totals=totals,
            budget=budget,
        )

        thread_view.additional_properties = d
        return thread_view

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
