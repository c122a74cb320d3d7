from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.approvers import Approvers
    from ..models.ballot_votes_item import BallotVotesItem


T = TypeVar("T", bound="Ballot")


@_attrs_define
class Ballot:
    """
    Attributes:
        votes (list[BallotVotesItem]):
        approvers (Approvers | Unset):
        digest (str | Unset): `sha256:` and 64 hex digits of the wait's prompt (fixed when it opened): what an answer
            quotes to say what it answers.
    """

    votes: list[BallotVotesItem]
    approvers: Approvers | Unset = UNSET
    digest: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        votes = []
        for votes_item_data in self.votes:
            votes_item = votes_item_data.to_dict()
            votes.append(votes_item)

        approvers: dict[str, Any] | Unset = UNSET
        if not isinstance(self.approvers, Unset):
            approvers = self.approvers.to_dict()

        digest = self.digest

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "votes": votes,
            }
        )
        if approvers is not UNSET:
            field_dict["approvers"] = approvers
        if digest is not UNSET:
            field_dict["digest"] = digest

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.approvers import Approvers
        from ..models.ballot_votes_item import BallotVotesItem

        d = dict(src_dict)
        votes = []
        _votes = d.pop("votes")
        for votes_item_data in _votes:
            votes_item = BallotVotesItem.from_dict(votes_item_data)

            votes.append(votes_item)

        _approvers = d.pop("approvers", UNSET)
        approvers: Approvers | Unset
        if isinstance(_approvers, Unset):
            approvers = UNSET
        else:
            approvers = Approvers.from_dict(_approvers)

        digest = d.pop("digest", UNSET)

        ballot = cls(
            votes=votes,
            approvers=approvers,
            digest=digest,
        )

        ballot.additional_properties = d
        return ballot

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
