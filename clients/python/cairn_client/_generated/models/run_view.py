from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.run_status import RunStatus
from ..models.run_upgrade import RunUpgrade
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.blocked import Blocked
    from ..models.budget import Budget
    from ..models.child_of import ChildOf
    from ..models.child_outcome import ChildOutcome
    from ..models.error_info import ErrorInfo
    from ..models.listening import Listening
    from ..models.run_crew_definition import RunCrewDefinition
    from ..models.run_trace import RunTrace
    from ..models.run_view_spent import RunViewSpent
    from ..models.signal import Signal
    from ..models.step import Step


T = TypeVar("T", bound="RunView")


@_attrs_define
class RunView:
    """A run with its steps: the document `cairn runs show --json` prints.

    Attributes:
        id (UUID):
        crew (str): The crew's name.
        crew_version (str):
        crew_fingerprint (str): `sha256:` and 16 hex digits of the crew definition's hash.
        status (RunStatus):
        cursor (int): Index of the next pending step (= steps succeeded).
        step_count (int):
        input_ (Any): The run's input.
        lease_epoch (int): Goes up by one with every claim.
        created_at (datetime.datetime):
        updated_at (datetime.datetime):
        crew_definition (RunCrewDefinition): The crew definition the run executes with: {name, version, agents: [...]}.
        steps (list[Step]):
        idempotency_key (None | str | Unset):
        thread_id (None | str | Unset):
        priority (int | Unset): Claim order: higher first, with ageing (see `SubmitRequest.priority`). Absent from
            servers older than this field: read it as 0.
        tenant (str | Unset): Whose run it is (see `SubmitRequest.tenant`). Absent for a run without one.
        budget (Budget | Unset): Limits on a run's model use, counted from its journal (a resumed run never counts a
            call twice). An absent limit is no limit.
        trace (RunTrace | Unset): The run's trace, when it is traced (docs/tracing.md): `trace_id` (32 hex; a run nobody
            called has its own id without dashes), `parent` (16 hex: the caller's span, or the parent run's span for a
            child; absent for a root), `sampled`. Absent for a run submitted without tracing.
        upgrade (RunUpgrade | Unset): The run's own upgrade policy, when its submit named one (absent: its crew
            definition's `upgrade`, default `pinned`).
        not_before (datetime.datetime | None | Unset):
        cancel_requested_at (datetime.datetime | None | Unset):
        parent_run_id (None | Unset | UUID): The run this one was forked from, or (with `child`) the run whose step
            started it.
        parent_step_idx (int | None | Unset): The step a fork starts at (steps before it were copied from the parent),
            or the parent's step that started this child.
        child (ChildOf | None | Unset): Set on a run a `children` step started (absent otherwise): where it hangs.
            `parent_run_id` names the same parent.
        error (ErrorInfo | None | Unset):
        finished_at (datetime.datetime | None | Unset):
        blocked (Blocked | Unset): Why a runnable run waits: its crew version has Rust agents and no live process offers
            it. Cleared when a process offering it claims the run.
        schedule (str | Unset): The schedule that started the run (its idempotency key is `schedule:NAME:SLOT`); absent
            otherwise.
        scheduled_for (datetime.datetime | Unset): The slot it ran for (RFC 3339 UTC), with `schedule`.
        children (list[ChildOutcome] | Unset): The runs this run's `children` steps started, in step and listing order
            (absent when there are none).
        spent (RunViewSpent | Unset): What the run has spent, counted as its budget counts: tokens and model calls from
            its finished responses, tool calls from its executed tools. Absent for a run without a budget (its own or its
            crew's).
        signals (list[Signal] | Unset): A run of a crew with a `signal` step: its signals, oldest first (absent when
            none).
        listening (Listening | Unset):
    """

    id: UUID
    crew: str
    crew_version: str
    crew_fingerprint: str
    status: RunStatus
    cursor: int
    step_count: int
    input_: Any
    lease_epoch: int
    created_at: datetime.datetime
    updated_at: datetime.datetime
    crew_definition: RunCrewDefinition
    steps: list[Step]
    idempotency_key: None | str | Unset = UNSET
    thread_id: None | str | Unset = UNSET
    priority: int | Unset = UNSET
    tenant: str | Unset = UNSET
    budget: Budget | Unset = UNSET
    trace: RunTrace | Unset = UNSET
    upgrade: RunUpgrade | Unset = UNSET
    not_before: datetime.datetime | None | Unset = UNSET
    cancel_requested_at: datetime.datetime | None | Unset = UNSET
    parent_run_id: None | Unset | UUID = UNSET
    parent_step_idx: int | None | Unset = UNSET
    child: ChildOf | None | Unset = UNSET
    error: ErrorInfo | None | Unset = UNSET
    finished_at: datetime.datetime | None | Unset = UNSET
    blocked: Blocked | Unset = UNSET
    schedule: str | Unset = UNSET
    scheduled_for: datetime.datetime | Unset = UNSET
    children: list[ChildOutcome] | Unset = UNSET
    spent: RunViewSpent | Unset = UNSET
    signals: list[Signal] | Unset = UNSET
    listening: Listening | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.child_of import ChildOf
        from ..models.error_info import ErrorInfo

        id = str(self.id)

        crew = self.crew

        crew_version = self.crew_version

        crew_fingerprint = self.crew_fingerprint

        status = self.status.value

        cursor = self.cursor

        step_count = self.step_count

        input_ = self.input_

        lease_epoch = self.lease_epoch

        created_at = self.created_at.isoformat()

        updated_at = self.updated_at.isoformat()

        crew_definition = self.crew_definition.to_dict()

        steps = []
        for steps_item_data in self.steps:
            steps_item = steps_item_data.to_dict()
            steps.append(steps_item)

        idempotency_key: None | str | Unset
        if isinstance(self.idempotency_key, Unset):
            idempotency_key = UNSET
        else:
            idempotency_key = self.idempotency_key

        thread_id: None | str | Unset
        if isinstance(self.thread_id, Unset):
            thread_id = UNSET
        else:
            thread_id = self.thread_id

        priority = self.priority

        tenant = self.tenant

        budget: dict[str, Any] | Unset = UNSET
        if not isinstance(self.budget, Unset):
            budget = self.budget.to_dict()

        trace: dict[str, Any] | Unset = UNSET
        if not isinstance(self.trace, Unset):
            trace = self.trace.to_dict()

        upgrade: str | Unset = UNSET
        if not isinstance(self.upgrade, Unset):
            upgrade = self.upgrade.value

        not_before: None | str | Unset
        if isinstance(self.not_before, Unset):
            not_before = UNSET
        elif isinstance(self.not_before, datetime.datetime):
            not_before = self.not_before.isoformat()
        else:
            not_before = self.not_before

        cancel_requested_at: None | str | Unset
        if isinstance(self.cancel_requested_at, Unset):
            cancel_requested_at = UNSET
        elif isinstance(self.cancel_requested_at, datetime.datetime):
            cancel_requested_at = self.cancel_requested_at.isoformat()
        else:
            cancel_requested_at = self.cancel_requested_at

        parent_run_id: None | str | Unset
        if isinstance(self.parent_run_id, Unset):
            parent_run_id = UNSET
        elif isinstance(self.parent_run_id, UUID):
            parent_run_id = str(self.parent_run_id)
        else:
            parent_run_id = self.parent_run_id

        parent_step_idx: int | None | Unset
        if isinstance(self.parent_step_idx, Unset):
            parent_step_idx = UNSET
        else:
            parent_step_idx = self.parent_step_idx

        child: dict[str, Any] | None | Unset
        if isinstance(self.child, Unset):
            child = UNSET
        elif isinstance(self.child, ChildOf):
            child = self.child.to_dict()
        else:
            child = self.child

        error: dict[str, Any] | None | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        elif isinstance(self.error, ErrorInfo):
            error = self.error.to_dict()
        else:
            error = self.error

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        blocked: dict[str, Any] | Unset = UNSET
        if not isinstance(self.blocked, Unset):
            blocked = self.blocked.to_dict()

        schedule = self.schedule

        scheduled_for: str | Unset = UNSET
        if not isinstance(self.scheduled_for, Unset):
            scheduled_for = self.scheduled_for.isoformat()

        children: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.children, Unset):
            children = []
            for children_item_data in self.children:
                children_item = children_item_data.to_dict()
                children.append(children_item)

        spent: dict[str, Any] | Unset = UNSET
        if not isinstance(self.spent, Unset):
            spent = self.spent.to_dict()

        signals: list[dict[str, Any]] | Unset = UNSET
        if not isinstance(self.signals, Unset):
            signals = []
            for signals_item_data in self.signals:
                signals_item = signals_item_data.to_dict()
                signals.append(signals_item)

        listening: dict[str, Any] | Unset = UNSET
        if not isinstance(self.listening, Unset):
            listening = self.listening.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "crew": crew,
                "crew_version": crew_version,
                "crew_fingerprint": crew_fingerprint,
                "status": status,
                "cursor": cursor,
                "step_count": step_count,
                "input": input_,
                "lease_epoch": lease_epoch,
                "created_at": created_at,
                "updated_at": updated_at,
                "crew_definition": crew_definition,
                "steps": steps,
            }
        )
        if idempotency_key is not UNSET:
            field_dict["idempotency_key"] = idempotency_key
        if thread_id is not UNSET:
            field_dict["thread_id"] = thread_id
        if priority is not UNSET:
            field_dict["priority"] = priority
        if tenant is not UNSET:
            field_dict["tenant"] = tenant
        if budget is not UNSET:
            field_dict["budget"] = budget
        if trace is not UNSET:
            field_dict["trace"] = trace
        if upgrade is not UNSET:
            field_dict["upgrade"] = upgrade
        if not_before is not UNSET:
            field_dict["not_before"] = not_before
        if cancel_requested_at is not UNSET:
            field_dict["cancel_requested_at"] = cancel_requested_at
        if parent_run_id is not UNSET:
            field_dict["parent_run_id"] = parent_run_id
        if parent_step_idx is not UNSET:
            field_dict["parent_step_idx"] = parent_step_idx
        if child is not UNSET:
            field_dict["child"] = child
        if error is not UNSET:
            field_dict["error"] = error
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at
        if blocked is not UNSET:
            field_dict["blocked"] = blocked
        if schedule is not UNSET:
            field_dict["schedule"] = schedule
        if scheduled_for is not UNSET:
            field_dict["scheduled_for"] = scheduled_for
        if children is not UNSET:
            field_dict["children"] = children
        if spent is not UNSET:
            field_dict["spent"] = spent
        if signals is not UNSET:
            field_dict["signals"] = signals
        if listening is not UNSET:
            field_dict["listening"] = listening

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.blocked import Blocked
        from ..models.budget import Budget
        from ..models.child_of import ChildOf
        from ..models.child_outcome import ChildOutcome
        from ..models.error_info import ErrorInfo
        from ..models.listening import Listening
        from ..models.run_crew_definition import RunCrewDefinition
        from ..models.run_trace import RunTrace
        from ..models.run_view_spent import RunViewSpent
        from ..models.signal import Signal
        from ..models.step import Step

        d = dict(src_dict)
        id = UUID(d.pop("id"))

        crew = d.pop("crew")

        crew_version = d.pop("crew_version")

        crew_fingerprint = d.pop("crew_fingerprint")

        status = RunStatus(d.pop("status"))

        cursor = d.pop("cursor")

        step_count = d.pop("step_count")

        input_ = d.pop("input")

        lease_epoch = d.pop("lease_epoch")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        crew_definition = RunCrewDefinition.from_dict(d.pop("crew_definition"))

        steps = []
        _steps = d.pop("steps")
        for steps_item_data in _steps:
            steps_item = Step.from_dict(steps_item_data)

            steps.append(steps_item)

        def _parse_idempotency_key(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        idempotency_key = _parse_idempotency_key(d.pop("idempotency_key", UNSET))

        def _parse_thread_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        thread_id = _parse_thread_id(d.pop("thread_id", UNSET))

        priority = d.pop("priority", UNSET)

        tenant = d.pop("tenant", UNSET)

        _budget = d.pop("budget", UNSET)
        budget: Budget | Unset
        if isinstance(_budget, Unset):
            budget = UNSET
        else:
            budget = Budget.from_dict(_budget)

        _trace = d.pop("trace", UNSET)
        trace: RunTrace | Unset
        if isinstance(_trace, Unset):
            trace = UNSET
        else:
            trace = RunTrace.from_dict(_trace)

        _upgrade = d.pop("upgrade", UNSET)
        upgrade: RunUpgrade | Unset
        if isinstance(_upgrade, Unset):
            upgrade = UNSET
        else:
            upgrade = RunUpgrade(_upgrade)

        def _parse_not_before(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                componentsschemas_nullable_time_type_0 = (
                    datetime.datetime.fromisoformat(data)
                )

                return componentsschemas_nullable_time_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        not_before = _parse_not_before(d.pop("not_before", UNSET))

        def _parse_cancel_requested_at(
            data: object,
        ) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                componentsschemas_nullable_time_type_0 = (
                    datetime.datetime.fromisoformat(data)
                )

                return componentsschemas_nullable_time_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        cancel_requested_at = _parse_cancel_requested_at(
            d.pop("cancel_requested_at", UNSET)
        )

        def _parse_parent_run_id(data: object) -> None | Unset | UUID:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                parent_run_id_type_0 = UUID(data)

                return parent_run_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | UUID, data)

        parent_run_id = _parse_parent_run_id(d.pop("parent_run_id", UNSET))

        def _parse_parent_step_idx(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        parent_step_idx = _parse_parent_step_idx(d.pop("parent_step_idx", UNSET))

        def _parse_child(data: object) -> ChildOf | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                child_type_0 = ChildOf.from_dict(data)

                return child_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ChildOf | None | Unset, data)

        child = _parse_child(d.pop("child", UNSET))

        def _parse_error(data: object) -> ErrorInfo | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                error_type_0 = ErrorInfo.from_dict(data)

                return error_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ErrorInfo | None | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_finished_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                componentsschemas_nullable_time_type_0 = (
                    datetime.datetime.fromisoformat(data)
                )

                return componentsschemas_nullable_time_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        finished_at = _parse_finished_at(d.pop("finished_at", UNSET))

        _blocked = d.pop("blocked", UNSET)
        blocked: Blocked | Unset
        if isinstance(_blocked, Unset):
            blocked = UNSET
        else:
            blocked = Blocked.from_dict(_blocked)

        schedule = d.pop("schedule", UNSET)

        _scheduled_for = d.pop("scheduled_for", UNSET)
        scheduled_for: datetime.datetime | Unset
        if isinstance(_scheduled_for, Unset):
            scheduled_for = UNSET
        else:
            scheduled_for = datetime.datetime.fromisoformat(_scheduled_for)

        _children = d.pop("children", UNSET)
        children: list[ChildOutcome] | Unset = UNSET
        if _children is not UNSET:
            children = []
            for children_item_data in _children:
                children_item = ChildOutcome.from_dict(children_item_data)

                children.append(children_item)

        _spent = d.pop("spent", UNSET)
        spent: RunViewSpent | Unset
        if isinstance(_spent, Unset):
            spent = UNSET
        else:
            spent = RunViewSpent.from_dict(_spent)

        _signals = d.pop("signals", UNSET)
        signals: list[Signal] | Unset = UNSET
        if _signals is not UNSET:
            signals = []
            for signals_item_data in _signals:
                signals_item = Signal.from_dict(signals_item_data)

                signals.append(signals_item)

        _listening = d.pop("listening", UNSET)
        listening: Listening | Unset
        if isinstance(_listening, Unset):
            listening = UNSET
        else:
            listening = Listening.from_dict(_listening)

        run_view = cls(
            id=id,
            crew=crew,
            crew_version=crew_version,
            crew_fingerprint=crew_fingerprint,
            status=status,
            cursor=cursor,
            step_count=step_count,
            input_=input_,
            lease_epoch=lease_epoch,
            created_at=created_at,
            updated_at=updated_at,
            crew_definition=crew_definition,
            steps=steps,
            idempotency_key=idempotency_key,
            thread_id=thread_id,
            priority=priority,
            tenant=tenant,
            budget=budget,
            trace=trace,
            upgrade=upgrade,
            not_before=not_before,
            cancel_requested_at=cancel_requested_at,
            parent_run_id=parent_run_id,
            parent_step_idx=parent_step_idx,
            child=child,
            error=error,
            finished_at=finished_at,
            blocked=blocked,
            schedule=schedule,
            scheduled_for=scheduled_for,
            children=children,
            spent=spent,
            signals=signals,
            listening=listening,
        )

        run_view.additional_properties = d
        return run_view

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
