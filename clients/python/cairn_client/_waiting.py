"""When `wait()` stops: the run states, as the API defines them.

`done`: the run ended (`succeeded`, `failed` or `cancelled`).
`stopped`: it ended, or it will not move on without a person: `interrupted`
(an operator must continue it), or `waiting` with an open wait of its own or
of one of its child runs (a run `waiting` while its children still work is
not stopped).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._generated import models as m

ENDED = frozenset({"succeeded", "failed", "cancelled"})
UNTIL = ("done", "stopped")


def check_until(until: str) -> None:
    if until not in UNTIL:
        raise ValueError(f"until must be 'done' or 'stopped', not {until!r}")


def verdict(run: m.RunView, until: str) -> bool | None:
    """True: reached; False: not yet; None: it depends on the run's open waits."""
    status = str(run.status)
    if status in ENDED:
        return True
    if until == "done":
        return False
    if status == "interrupted":
        return True
    return None if status == "waiting" else False


def has_children(run: m.RunView) -> bool:
    return bool(run.children) if isinstance(run.children, list) else False


def waits_under(run_id: Any, waits: Iterable[m.Wait]) -> bool:
    """Whether one of these open waits belongs to a descendant of the run."""
    rid = str(run_id)
    for wait in waits:
        parents = wait.parents if isinstance(wait.parents, list) else []
        if any(str(p.parent_run_id) == rid for p in parents):
            return True
    return False


class Backoff:
    """Poll delays: from `first` up by half each time, to `most` seconds."""

    def __init__(self, first: float = 0.05, most: float = 1.0):
        self.next, self.most = first, most

    def __call__(self) -> float:
        now, self.next = self.next, min(self.next * 1.5, self.most)
        return now
