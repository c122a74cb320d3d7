"""The operations the hand-written layer calls, as plain request descriptions.

Each builder returns a `Call`: the API operation (its `operationId`, method
and path, as in docs/openapi.json), the query, the JSON body and how to read
a success answer into a generated model. The sync and the async client
send the same `Call`s, so both speak the API the same way. Bodies come from
the generated request models, so field names are the document's; a
parameter left as None is not sent (so an older server never sees a field
the caller did not use).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qs, quote, urlsplit

import httpx

from ._generated import models as m
from ._generated.types import UNSET

T = TypeVar("T")


@dataclass(frozen=True)
class Op:
    """One API operation: `id` is its `operationId` in docs/openapi.json."""

    id: str
    method: str
    path: str


SUBMIT = Op("submitRun", "POST", "/v1/runs")
LIST_RUNS = Op("listRuns", "GET", "/v1/runs")
GET_RUN = Op("getRun", "GET", "/v1/runs/{id}")
EVENTS = Op("streamRunEvents", "GET", "/v1/runs/{id}/events")
JOURNAL = Op("getRunJournal", "GET", "/v1/runs/{id}/journal")
RETRY = Op("retryRun", "POST", "/v1/runs/{id}/retry")
CONTINUE = Op("continueRun", "POST", "/v1/runs/{id}/continue")
CANCEL = Op("cancelRun", "POST", "/v1/runs/{id}/cancel")
FORK = Op("forkRun", "POST", "/v1/runs/{id}/fork")
CONTEXT = Op("addRunContext", "POST", "/v1/runs/{id}/context")
LIST_WAITS = Op("listWaits", "GET", "/v1/waits")
ANSWER = Op("answerWait", "POST", "/v1/waits/{id}/answer")
LIST_THREADS = Op("listThreads", "GET", "/v1/threads")
GET_THREAD = Op("getThread", "GET", "/v1/threads/{id}")
LIST_CREWS = Op("listCrews", "GET", "/v1/crews")
SEND_SIGNAL = Op("sendSignal", "POST", "/v1/signals")
RUN_SIGNALS = Op("getRunSignals", "GET", "/v1/runs/{id}/signals")
OPENAPI = Op("getOpenApi", "GET", "/v1/openapi.json")

ALL = (SUBMIT, LIST_RUNS, GET_RUN, EVENTS, JOURNAL, RETRY, CONTINUE, CANCEL, FORK, CONTEXT,
       LIST_WAITS, ANSWER, LIST_THREADS, GET_THREAD, LIST_CREWS, SEND_SIGNAL, RUN_SIGNALS,
       OPENAPI)


@dataclass
class Call(Generic[T]):
    """A request to send and how to read its success answer."""

    op: Op
    read: Callable[[httpx.Response], T]
    ident: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None

    @property
    def path(self) -> str:
        if self.ident is None:
            return self.op.path
        return self.op.path.replace("{id}", quote(self.ident, safe=""))


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a listing, and the cursor of the next (None on the last)."""

    items: list[T]
    next_cursor: str | None


def _json(model: Any) -> Callable[[httpx.Response], Any]:
    return lambda r: model.from_dict(r.json())


def _opt(value: Any) -> Any:
    return UNSET if value is None else value


def _query(**params: Any) -> dict[str, str]:
    out = {}
    for name, value in params.items():
        if value is not None:
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def _budget(value: Any) -> Any:
    """A `Budget` model, or a dict sent as it is (the server checks its names)."""
    return value.to_dict() if isinstance(value, m.Budget) else dict(value)


def submit(crew: str, input: Any, *, key: str | None = None, thread: str | None = None,
           tenant: str | None = None, priority: int | None = None,
           budget: m.Budget | Mapping[str, Any] | None = None, on_busy: str | None = None,
           crew_version: str | None = None, upgrade: str | None = None,
           traceparent: str | None = None) -> Call[m.RunView]:
    req = m.SubmitRequest(crew=crew, input_=input, idempotency_key=_opt(key),
                          thread_id=_opt(thread), tenant=_opt(tenant), priority=_opt(priority),
                          on_busy=_opt(on_busy and m.OnBusy(on_busy)),
                          crew_version=_opt(crew_version), traceparent=_opt(traceparent))
    body = req.to_dict()
    if upgrade is not None:
        body["upgrade"] = upgrade
    if budget is not None:
        body["budget"] = _budget(budget)
    return Call(SUBMIT, _json(m.RunView), body=body)


def get_run(run_id: Any) -> Call[m.RunView]:
    return Call(GET_RUN, _json(m.RunView), ident=str(run_id))


def runs_page(*, status: str | None = None, crew: str | None = None, tenant: str | None = None,
              parent: Any = None, order: str | None = None, limit: int | None = None,
              cursor: str | None = None) -> Call[Page[m.Run]]:
    def read(r: httpx.Response) -> Page[m.Run]:
        page = m.RunPage.from_dict(r.json())
        return Page(page.runs, page.next_cursor)

    params = _query(status=status, crew=crew, tenant=tenant, parent=parent, order=order,
                    limit=limit, cursor=cursor)
    return Call(LIST_RUNS, read, params=params)


def journal(run_id: Any, step: int | None = None) -> Call[list[m.JournalEntry]]:
    return Call(JOURNAL, lambda r: m.JournalList.from_dict(r.json()).items, ident=str(run_id),
                params=_query(step=step))


def retry(run_id: Any, *, by: str | None = None, reason: str | None = None,
          rerun_children: bool | None = None) -> Call[m.RunView]:
    req = m.RetryRequest(by=_opt(by), reason=_opt(reason), rerun_children=_opt(rerun_children))
    return Call(RETRY, _json(m.RunView), ident=str(run_id), body=req.to_dict())


def continue_(run_id: Any, *, by: str | None = None, reason: str | None = None,
              raise_budget: m.Budget | Mapping[str, Any] | None = None) -> Call[m.RunView]:
    body = m.ContinueRequest(by=_opt(by), reason=_opt(reason)).to_dict()
    if raise_budget is not None:
        body["raise"] = _budget(raise_budget)
    return Call(CONTINUE, _json(m.RunView), ident=str(run_id), body=body)


def cancel(run_id: Any, *, by: str | None = None, reason: str | None = None) -> Call[m.RunView]:
    req = m.ActionRequest(by=_opt(by), reason=_opt(reason))
    return Call(CANCEL, _json(m.RunView), ident=str(run_id), body=req.to_dict())


def fork(run_id: Any, from_step: int, *, input: Any = None, thread: str | None = None,
         crew_version: str | None = None, rerun_children: bool | None = None,
         by: str | None = None, reason: str | None = None) -> Call[m.RunView]:
    req = m.ForkRequest(from_step=from_step, input_=_opt(input), thread_id=_opt(thread),
                        crew_version=_opt(crew_version), rerun_children=_opt(rerun_children),
                        by=_opt(by), reason=_opt(reason))
    return Call(FORK, _json(m.RunView), ident=str(run_id), body=req.to_dict())


def add_context(run_id: Any, context: Mapping[str, Any], *, by: str | None = None,
                reason: str | None = None) -> Call[m.RunView]:
    body = {"context": dict(context), **m.ActionRequest(by=_opt(by), reason=_opt(reason)).to_dict()}
    return Call(CONTEXT, _json(m.RunView), ident=str(run_id), body=body)


def list_waits(*, run: Any = None, status: str | None = None) -> Call[list[m.Wait]]:
    return Call(LIST_WAITS, lambda r: m.WaitList.from_dict(r.json()).waits,
                params=_query(run=run, status=status))


_ANSWERS: dict[str, tuple[type, str | None]] = {
    "approve": (m.AnswerApproveRequest, None),
    "reject": (m.AnswerRejectRequest, "feedback"),
    "edit": (m.AnswerEditRequest, "output"),
    "answer": (m.AnswerValueRequest, "value"),
}


def answer(wait_id: Any, decision: str, *, feedback: str | None = None, output: Any = None,
           value: Any = None, by: str | None = None, reason: str | None = None) -> Call[m.Answered]:
    """One answer: approve; reject with `feedback`; edit with `output`; answer with `value`."""
    if decision not in _ANSWERS:
        raise ValueError(f"decision must be one of {sorted(_ANSWERS)}, not {decision!r}")
    model, needs = _ANSWERS[decision]
    given = {k: v for k, v in (("feedback", feedback), ("output", output), ("value", value))
             if v is not None}
    if set(given) != ({needs} if needs else set()):
        wanted = f"`{needs}`" if needs else "no feedback, output or value"
        raise ValueError(f"a {decision!r} answer takes {wanted}; got {sorted(given) or 'none'}")
    req = model(decision=decision, by=_opt(by), reason=_opt(reason), **given)
    return Call(ANSWER, _json(m.Answered), ident=str(wait_id), body=req.to_dict())


def events(run_id: Any, *, follow: bool = True) -> Call[None]:
    """The event stream's request (read by the SSE reader, not by `read`)."""
    params = {} if follow else {"follow": "false"}
    return Call(EVENTS, lambda r: None, ident=str(run_id), params=params)


_NEXT = re.compile(r'<([^>]*)>\s*;\s*rel="?next"?')


def next_link_cursor(link: str | None) -> str | None:
    """The `cursor` of a `Link: <...>; rel="next"` header, or None."""
    found = _NEXT.search(link or "")
    if not found:
        return None
    return parse_qs(urlsplit(found.group(1)).query).get("cursor", [None])[0]


def threads_page(*, limit: int | None = None,
                 cursor: str | None = None) -> Call[Page[m.ThreadSummary]]:
    def read(r: httpx.Response) -> Page[m.ThreadSummary]:
        items = [m.ThreadSummary.from_dict(t) for t in r.json()]
        return Page(items, next_link_cursor(r.headers.get("link")))

    return Call(LIST_THREADS, read, params=_query(limit=limit, cursor=cursor))


def get_thread(thread_id: str) -> Call[m.ThreadView]:
    return Call(GET_THREAD, _json(m.ThreadView), ident=thread_id)


def send_signal(target: str, name: str, *, payload: Any = None, id: str | None = None,
                start: m.SignalStart | Mapping[str, Any] | None = None) -> Call[m.Sent]:
    """A signal for the one unfinished run `target` names (a run id, `key:K`, `thread:T`);
    with `start` (`{"crew", "version"?, "input"?}`), a target with no run starts one."""
    req = m.SignalRequest(target=target, name=name, payload=_opt(payload), id=_opt(id))
    body = req.to_dict()
    if start is not None:
        body["start"] = start.to_dict() if isinstance(start, m.SignalStart) else dict(start)
    return Call(SEND_SIGNAL, _json(m.Sent), body=body)


def run_signals(run_id: Any) -> Call[m.RunSignals]:
    return Call(RUN_SIGNALS, _json(m.RunSignals), ident=str(run_id))


def list_crews() -> Call[list[m.CrewSummary]]:
    return Call(LIST_CREWS, lambda r: [m.CrewSummary.from_dict(c) for c in r.json()])


def openapi() -> Call[dict[str, Any]]:
    return Call(OPENAPI, lambda r: r.json())
