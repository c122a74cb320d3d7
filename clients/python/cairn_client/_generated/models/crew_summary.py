from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.crew_summary_agents_item import CrewSummaryAgentsItem


T = TypeVar("T", bound="CrewSummary")


@_attrs_define
class CrewSummary:
    """
    Attributes:
        name (str):
        version (str):
        fingerprint (str):
        agents (list[CrewSummaryAgentsItem]):
        newest (bool): The version a submit that names none takes (the newest loaded, numbers in versions compared as
            numbers).
        unfinished (int): Runs of this version (by fingerprint) on this database that have not ended: queued, running,
            waiting, interrupted or failed.
    """

    name: str
    version: str
    fingerprint: str
    agents: list[CrewSummaryAgentsItem]
    newest: bool
    unfinished: int
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        version = self.version

        fingerprint = self.fingerprint

        agents = []
        for agents_item_data in self.agents:
            agents_item = agents_item_data.to_dict()
            agents.append(agents_item)

        newest = self.newest

        unfinished = self.unfinished

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "version": version,
                "fingerprint": fingerprint,
                "agents": agents,
                "newest": newest,
                "unfinished": unfinished,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.crew_summary_agents_item import CrewSummaryAgentsItem

        d = dict(src_dict)
        name = d.pop("name")

        version = d.pop("version")

        fingerprint = d.pop("fingerprint")

        agents = []
        _agents = d.pop("agents")
        for agents_item_data in _agents:
            agents_item = CrewSummaryAgentsItem.from_dict(agents_item_data)

            agents.append(agents_item)

        newest = d.pop("newest")

        unfinished = d.pop("unfinished")

        crew_summary = cls(
            name=name,
            version=version,
            fingerprint=fingerprint,
            agents=agents,
            newest=newest,
            unfinished=unfinished,
        )

        crew_summary.additional_properties = d
        return crew_summary

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
