from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.get_crew_version_response_200_agents_item import (
        GetCrewVersionResponse200AgentsItem,
    )


T = TypeVar("T", bound="GetCrewVersionResponse200")


@_attrs_define
class GetCrewVersionResponse200:
    """
    Attributes:
        name (str):
        version (str):
        agents (list[GetCrewVersionResponse200AgentsItem]):
    """

    name: str
    version: str
    agents: list[GetCrewVersionResponse200AgentsItem]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        version = self.version

        agents = []
        for agents_item_data in self.agents:
            agents_item = agents_item_data.to_dict()
            agents.append(agents_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "version": version,
                "agents": agents,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.get_crew_version_response_200_agents_item import (
            GetCrewVersionResponse200AgentsItem,
        )

        d = dict(src_dict)
        name = d.pop("name")

        version = d.pop("version")

        agents = []
        _agents = d.pop("agents")
        for agents_item_data in _agents:
            agents_item = GetCrewVersionResponse200AgentsItem.from_dict(
                agents_item_data
            )

            agents.append(agents_item)

        get_crew_version_response_200 = cls(
            name=name,
            version=version,
            agents=agents,
        )

        get_crew_version_response_200.additional_properties = d
        return get_crew_version_response_200

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
