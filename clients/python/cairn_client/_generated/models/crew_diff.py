from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.crew_diff_from import CrewDiffFrom
    from ..models.crew_diff_steps_item import CrewDiffStepsItem
    from ..models.crew_diff_to import CrewDiffTo
    from ..models.upgrade_verdict import UpgradeVerdict


T = TypeVar("T", bound="CrewDiff")


@_attrs_define
class CrewDiff:
    """How version `to` of a crew differs from `from`, step by step (the document of `cairn crews diff --json`).

    Attributes:
        from_ (CrewDiffFrom):
        to (CrewDiffTo):
        steps (list[CrewDiffStepsItem]):
        runs (list[UpgradeVerdict]): Every unfinished run of `from`, and whether it can move to `to`.
    """

    from_: CrewDiffFrom
    to: CrewDiffTo
    steps: list[CrewDiffStepsItem]
    runs: list[UpgradeVerdict]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from_ = self.from_.to_dict()

        to = self.to.to_dict()

        steps = []
        for steps_item_data in self.steps:
            steps_item = steps_item_data.to_dict()
            steps.append(steps_item)

        runs = []
        for runs_item_data in self.runs:
            runs_item = runs_item_data.to_dict()
            runs.append(runs_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "from": from_,
                "to": to,
                "steps": steps,
                "runs": runs,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.crew_diff_from import CrewDiffFrom
        from ..models.crew_diff_steps_item import CrewDiffStepsItem
        from ..models.crew_diff_to import CrewDiffTo
        from ..models.upgrade_verdict import UpgradeVerdict

        d = dict(src_dict)
        from_ = CrewDiffFrom.from_dict(d.pop("from"))

        to = CrewDiffTo.from_dict(d.pop("to"))

        steps = []
        _steps = d.pop("steps")
        for steps_item_data in _steps:
            steps_item = CrewDiffStepsItem.from_dict(steps_item_data)

            steps.append(steps_item)

        runs = []
        _runs = d.pop("runs")
        for runs_item_data in _runs:
            runs_item = UpgradeVerdict.from_dict(runs_item_data)

            runs.append(runs_item)

        crew_diff = cls(
            from_=from_,
            to=to,
            steps=steps,
            runs=runs,
        )

        crew_diff.additional_properties = d
        return crew_diff

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
