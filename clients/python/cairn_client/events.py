"""What `watch()` yields: stored run events and live model text.

A stored event is the generated `Event` model (`run_id`, `seq`, `at`,
`kind`, `data`); its `seq` counts from 1 per run and is the stream's SSE
`id`. Live text is an `OutputDelta`: a piece of an `llm` step's text as the
model streams it. Pieces are never stored, so a reconnect does not replay
the ones it missed; the whole block is in the run's journal
(`runs.journal()`), as an item whose `seq` is greater than `after_seq`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from httpx_sse import ServerSentEvent

from ._generated.models import Event

TERMINAL_KINDS = frozenset({"run_succeeded", "run_failed", "run_cancelled"})


@dataclass(frozen=True)
class OutputDelta:
    """A piece of an `llm` step's text, live (`kind` is always "output_delta").

    idx and attempt: the step and its attempt; after_seq: the journal `seq`
    of the step's last stored item before this text (the block arrives later
    as a journal item with a greater `seq`); text: the piece.
    """

    run_id: str
    idx: int
    attempt: int
    after_seq: int
    text: str
    kind: str = "output_delta"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OutputDelta:
        return cls(run_id=str(d["run_id"]), idx=int(d["idx"]), attempt=int(d["attempt"]),
                   after_seq=int(d.get("after_seq", 0)), text=str(d["text"]))


RunEvent = Event | OutputDelta


class WatchState:
    """Where a watch stands across reconnects: the last stored `seq` it yielded.

    `accept()` turns one SSE message into what `watch()` yields, or None for
    a duplicate (a stored `seq` already yielded) or a message of a kind this
    client does not know and that is not stored (a newer server's).
    """

    def __init__(self, after: int = 0):
        self.last_seq = after
        self.ended = False

    def headers(self) -> dict[str, str]:
        """`Last-Event-ID` for the next connection (none before the first event)."""
        return {"Last-Event-ID": str(self.last_seq)} if self.last_seq else {}

    def accept(self, sse: ServerSentEvent) -> RunEvent | None:
        if not sse.data:
            return None
        data = json.loads(sse.data)
        if not isinstance(data, dict):
            return None
        if data.get("kind") == "output_delta":
            return OutputDelta.from_dict(data)
        if "seq" not in data:
            return None
        event = Event.from_dict(data)
        if event.seq <= self.last_seq:
            return None
        self.last_seq = event.seq
        self.ended = event.kind in TERMINAL_KINDS
        return event


__all__ = ["Event", "OutputDelta", "RunEvent", "TERMINAL_KINDS", "WatchState"]
