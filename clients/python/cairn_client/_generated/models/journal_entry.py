from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.journal_entry_kind import JournalEntryKind

T = TypeVar("T", bound="JournalEntry")


@_attrs_define
class JournalEntry:
    """
    Attributes:
        idx (int): The step.
        seq (int): Order within the step, across attempts.
        attempt (int):
        generation (int): Rejected reviews before this item: a re-run with feedback starts a fresh journal.
        kind (JournalEntryKind):
        payload (Any): The item: {text}, {call_id, name}, {call_id, name, arguments, idempotency_key}, {call_id,
            content, is_error, synthesized?}, {call_id, answer}, {action, …} or {stop_reason, input_tokens, output_tokens,
            ms}.
        created_at (datetime.datetime):
    """

    idx: int
    seq: int
    attempt: int
    generation: int
    kind: JournalEntryKind
    payload: Any
    created_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        idx = self.idx

        seq = self.seq

        attempt = self.attempt

        generation = self.generation

        kind = self.kind.value

        payload = self.payload

        created_at = self.created_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "idx": idx,
                "seq": seq,
                "attempt": attempt,
                "generation": generation,
                "kind": kind,
                "payload": payload,
                "created_at": created_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        idx = d.pop("idx")

        seq = d.pop("seq")

        attempt = d.pop("attempt")

        generation = d.pop("generation")

        kind = JournalEntryKind(d.pop("kind"))

        payload = d.pop("payload")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        journal_entry = cls(
            idx=idx,
            seq=seq,
            attempt=attempt,
            generation=generation,
            kind=kind,
            payload=payload,
            created_at=created_at,
        )

        journal_entry.additional_properties = d
        return journal_entry

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
