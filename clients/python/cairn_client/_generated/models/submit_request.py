from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..models.on_busy import OnBusy
from ..models.submit_request_upgrade_type_1 import SubmitRequestUpgradeType1
from ..models.submit_request_upgrade_type_2_type_1 import SubmitRequestUpgradeType2Type1
from ..models.submit_request_upgrade_type_3_type_1 import SubmitRequestUpgradeType3Type1
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.budget import Budget


T = TypeVar("T", bound="SubmitRequest")


@_attrs_define
class SubmitRequest:
    """
    Example:
        {'crew': 'research', 'input': {'topic': 'rust'}, 'idempotency_key': 'order-42'}

    Attributes:
        crew (str): A crew name from `GET /v1/crews`.
        input_ (Any): The run's input: any JSON value (templates see it as `input`).
        idempotency_key (None | str | Unset): Submitting again with the same key returns the same run.
        thread_id (None | str | Unset): Groups runs into one conversation. A conversation thread: an opaque string of 1
            to 256 bytes of UTF-8 (`maxLength` counts characters; the server counts bytes) with no NUL character (anything
            else is 400 `bad_thread_id`, and nothing is stored).
        on_busy (None | OnBusy | Unset): When the thread has a queued, running, waiting or interrupted run: `queue`
            (default) runs this one after it, `reject` stores nothing (409 `thread_busy`), `interrupt` cancels it. Absent or
            null: `queue`.
        priority (int | None | Unset): Claim order (default 0): higher runs first, with ageing: each point is a minute's
            head start over a run submitted at the same moment, so lower priorities still run. Child runs inherit it. Out of
            range: 400 `invalid_body`.
        tenant (None | str | Unset): Whose run it is: 1 to 128 bytes of UTF-8 (`maxLength` counts characters; the server
            counts bytes), not only spaces, with no control or Unicode format character (U+200B, U+202E, …), `,` or `=`
            (anything else is 400 `bad_tenant`, and nothing is stored). Within a priority, claims go round-robin across
            tenants (each tenant's queued runs are a second apart in claim order); children and forks inherit it, and an
            agent's `limit_key = ["tenant"]` narrows its provider key by it.
        budget (Budget | None | Unset): Limits on the run's model use, over its crew's `[budget]` per limit. A model
            call that could pass one is not made: the run becomes `interrupted` with error kind `budget_exceeded`.
        traceparent (None | str | Unset): The caller's trace, as a W3C `traceparent` (`00-<32 hex trace id>-<16 hex span
            id>-<2 hex flags>`): the run's spans join that trace under that span, sampled as the caller decided. Absent: the
            `traceparent` request header, if any. Malformed: 400 `invalid_body`. Stored with the run only when the server
            exports traces (`OTEL_EXPORTER_OTLP_ENDPOINT`) or a caller sent one.
        upgrade (None | SubmitRequestUpgradeType1 | SubmitRequestUpgradeType2Type1 | SubmitRequestUpgradeType3Type1 |
            Unset): The run's own upgrade policy, over its crew file's top-level `upgrade` (default `pinned`): `pinned`
            finishes on the version it started on; `compatible` moves, at a claim at a step boundary, to the newest version
            of its crew the claiming process offers when that version keeps the steps the run has started (same roles, same
            kinds, in order); `manual` moves only by an operator (`cairn runs upgrade`). Another value: 400 `invalid_body`.
        crew_version (None | str | Unset): The version of `crew` to run, among those the server loaded (`GET
            /v1/crews`). Absent: the newest. A version it did not load: 404 `unknown_crew`, naming the versions loaded.
    """

    crew: str
    input_: Any
    idempotency_key: None | str | Unset = UNSET
    thread_id: None | str | Unset = UNSET
    on_busy: None | OnBusy | Unset = UNSET
    priority: int | None | Unset = UNSET
    tenant: None | str | Unset = UNSET
    budget: Budget | None | Unset = UNSET
    traceparent: None | str | Unset = UNSET
    upgrade: (
        None
        | SubmitRequestUpgradeType1
        | SubmitRequestUpgradeType2Type1
        | SubmitRequestUpgradeType3Type1
        | Unset
    ) = UNSET
    crew_version: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        from ..models.budget import Budget

        crew = self.crew

        input_ = self.input_

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

        on_busy: None | str | Unset
        if isinstance(self.on_busy, Unset):
            on_busy = UNSET
        elif isinstance(self.on_busy, OnBusy):
            on_busy = self.on_busy.value
        else:
            on_busy = self.on_busy

        priority: int | None | Unset
        if isinstance(self.priority, Unset):
            priority = UNSET
        else:
            priority = self.priority

        tenant: None | str | Unset
        if isinstance(self.tenant, Unset):
            tenant = UNSET
        else:
            tenant = self.tenant

        budget: dict[str, Any] | None | Unset
        if isinstance(self.budget, Unset):
            budget = UNSET
        elif isinstance(self.budget, Budget):
            budget = self.budget.to_dict()
        else:
            budget = self.budget

        traceparent: None | str | Unset
        if isinstance(self.traceparent, Unset):
            traceparent = UNSET
        else:
            traceparent = self.traceparent

        upgrade: None | str | Unset
        if isinstance(self.upgrade, Unset):
            upgrade = UNSET
        elif (
            isinstance(self.upgrade, SubmitRequestUpgradeType1)
            or isinstance(self.upgrade, SubmitRequestUpgradeType2Type1)
            or isinstance(self.upgrade, SubmitRequestUpgradeType3Type1)
        ):
            upgrade = self.upgrade.value
        else:
            upgrade = self.upgrade

        crew_version: None | str | Unset
        if isinstance(self.crew_version, Unset):
            crew_version = UNSET
        else:
            crew_version = self.crew_version

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "crew": crew,
                "input": input_,
            }
        )
        if idempotency_key is not UNSET:
            field_dict["idempotency_key"] = idempotency_key
        if thread_id is not UNSET:
            field_dict["thread_id"] = thread_id
        if on_busy is not UNSET:
            field_dict["on_busy"] = on_busy
        if priority is not UNSET:
            field_dict["priority"] = priority
        if tenant is not UNSET:
            field_dict["tenant"] = tenant
        if budget is not UNSET:
            field_dict["budget"] = budget
        if traceparent is not UNSET:
            field_dict["traceparent"] = traceparent
        if upgrade is not UNSET:
            field_dict["upgrade"] = upgrade
        if crew_version is not UNSET:
            field_dict["crew_version"] = crew_version

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.budget import Budget

        d = dict(src_dict)
        crew = d.pop("crew")

        input_ = d.pop("input")

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

        def _parse_on_busy(data: object) -> None | OnBusy | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                on_busy_type_0 = OnBusy(data)

                return on_busy_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | OnBusy | Unset, data)

        on_busy = _parse_on_busy(d.pop("on_busy", UNSET))

        def _parse_priority(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        priority = _parse_priority(d.pop("priority", UNSET))

        def _parse_tenant(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        tenant = _parse_tenant(d.pop("tenant", UNSET))

        def _parse_budget(data: object) -> Budget | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                budget_type_0 = Budget.from_dict(data)

                return budget_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Budget | None | Unset, data)

        budget = _parse_budget(d.pop("budget", UNSET))

        def _parse_traceparent(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        traceparent = _parse_traceparent(d.pop("traceparent", UNSET))

        def _parse_upgrade(
            data: object,
        ) -> (
            None
            | SubmitRequestUpgradeType1
            | SubmitRequestUpgradeType2Type1
            | SubmitRequestUpgradeType3Type1
            | Unset
        ):
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                upgrade_type_1 = SubmitRequestUpgradeType1(data)

                return upgrade_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, str):
                    raise TypeError()
                upgrade_type_2_type_1 = SubmitRequestUpgradeType2Type1(data)

                return upgrade_type_2_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            try:
                if not isinstance(data, str):
                    raise TypeError()
                upgrade_type_3_type_1 = SubmitRequestUpgradeType3Type1(data)

                return upgrade_type_3_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(
                None
                | SubmitRequestUpgradeType1
                | SubmitRequestUpgradeType2Type1
                | SubmitRequestUpgradeType3Type1
                | Unset,
                data,
            )

        upgrade = _parse_upgrade(d.pop("upgrade", UNSET))

        def _parse_crew_version(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        crew_version = _parse_crew_version(d.pop("crew_version", UNSET))

        submit_request = cls(
            crew=crew,
            input_=input_,
            idempotency_key=idempotency_key,
            thread_id=thread_id,
            on_busy=on_busy,
            priority=priority,
            tenant=tenant,
            budget=budget,
            traceparent=traceparent,
            upgrade=upgrade,
            crew_version=crew_version,
        )

        return submit_request
