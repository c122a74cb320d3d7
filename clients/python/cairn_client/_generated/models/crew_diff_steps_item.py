from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.crew_diff_steps_item_change import CrewDiffStepsItemChange
from ..types import UNSET, Unset

T = TypeVar("T", bound="CrewDiffStepsItem")


@_attrs_define
class CrewDiffStepsItem:
    """
    Attributes:
        idx (int):
        change (CrewDiffStepsItemChange):
        from_ (None | str | Unset): `role (kind)` in `from`.
        to (None | str | Unset): `role (kind)` in `to`.
        fields (list[str] | Unset): For a `changed` step: what differs, as paths into the agent's stored definition
            (`template`, `timeout_ms`, `crew_def.agents.0.template`). Directories are no part of a version.
    """

    idx: int
    change: CrewDiffStepsItemChange
    from_: None | str | Unset = UNSET
    to: None | str | Unset = UNSET
    fields: list[str] | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        idx = self.idx

        change = self.change.value

        from_: None | str | Unset
        if isinstance(self.from_, Unset):
            from_ = UNSET
        else:
            from_ = self.from_

        to: None | str | Unset
        if isinstance(self.to, Unset):
            to = UNSET
        else:
            to = self.to

        fields: list[str] | Unset = UNSET
        if not isinstance(self.fields, Unset):
            fields = self.fields

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "idx": idx,
                "change": change,
            }
        )
        if from_ is not UNSET:
            field_dict["from"] = from_
        if to is not UNSET:
            field_dict["to"] = to
        if fields is not UNSET:
            field_dict["fields"] = fields

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        idx = d.pop("idx")

        change = CrewDiffStepsItemChange(d.pop("change"))

        def _parse_from_(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        from_ = _parse_from_(d.pop("from", UNSET))

        def _parse_to(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        to = _parse_to(d.pop("to", UNSET))

        fields = cast(list[str], d.pop("fields", UNSET))

        crew_diff_steps_item = cls(
            idx=idx,
            change=change,
            from_=from_,
            to=to,
            fields=fields,
        )

        crew_diff_steps_item.additional_properties = d
        return crew_diff_steps_item

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
