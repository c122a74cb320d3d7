from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.compacted_rules import CompactedRules


T = TypeVar("T", bound="Compacted")


@_attrs_define
class Compacted:
    """Rows removed (or, dry, that would be), by table: the document `cairn compact --json` prints.

    Attributes:
        runs (int):
        steps (int):
        events (int):
        journal_items (int):
        waits (int):
        rules (CompactedRules | Unset): `runs` by the rule that removes each (each run is counted under one): succeeded
            or cancelled runs past `finished_older_than`, failed runs past `failed_older_than`, a thread's finished runs
            beyond its newest `keep_per_thread`. A dry run says the same of what it would remove.
        run_ids (list[UUID] | Unset): The runs removed whole (a dry run: that it would remove), oldest first. Absent
            when none.
    """

    runs: int
    steps: int
    events: int
    journal_items: int
    waits: int
    rules: CompactedRules | Unset = UNSET
    run_ids: list[UUID] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        runs = self.runs

        steps = self.steps

        events = self.events

        journal_items = self.journal_items

        waits = self.waits

        rules: dict[str, Any] | Unset = UNSET
        if not isinstance(self.rules, Unset):
            rules = self.rules.to_dict()

        run_ids: list[str] | Unset = UNSET
        if not isinstance(self.run_ids, Unset):
            run_ids = []
            for run_ids_item_data in self.run_ids:
                run_ids_item = str(run_ids_item_data)
                run_ids.append(run_ids_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "runs": runs,
                "steps": steps,
                "events": events,
                "journal_items": journal_items,
                "waits": waits,
            }
        )
        if rules is not UNSET:
            field_dict["rules"] = rules
        if run_ids is not UNSET:
            field_dict["run_ids"] = run_ids

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.compacted_rules import CompactedRules

        d = dict(src_dict)
        runs = d.pop("runs")

        steps = d.pop("steps")

        events = d.pop("events")

        journal_items = d.pop("journal_items")

        waits = d.pop("waits")

        _rules = d.pop("rules", UNSET)
        rules: CompactedRules | Unset
        if isinstance(_rules, Unset):
            rules = UNSET
        else:
            rules = CompactedRules.from_dict(_rules)

        _run_ids = d.pop("run_ids", UNSET)
        run_ids: list[UUID] | Unset = UNSET
        if _run_ids is not UNSET:
            run_ids = []
            for run_ids_item_data in _run_ids:
                run_ids_item = UUID(run_ids_item_data)

                run_ids.append(run_ids_item)

        compacted = cls(
            runs=runs,
            steps=steps,
            events=events,
            journal_items=journal_items,
            waits=waits,
            rules=rules,
            run_ids=run_ids,
        )

        compacted.additional_properties = d
        return compacted

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
