from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.schedule_overlap import ScheduleOverlap
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.cadence_cron import CadenceCron
    from ..models.cadence_every import CadenceEvery


T = TypeVar("T", bound="Schedule")


@_attrs_define
class Schedule:
    """A schedule: runs of a stored crew version started by the clock, each slot at most once (its run's idempotency key is
    `schedule:NAME:SLOT`).

        Attributes:
            name (str):
            crew (str):
            fingerprint (str): The stored crew version its runs use.
            input_ (Any): The input template: `{{ scheduled_for }}` and `{{ fired_at }}` in its strings become those times
                (RFC 3339 UTC).
            cadence (CadenceCron | CadenceEvery): How often it fires: `{"every": {"secs": N}}` (from its creation) or
                `{"cron": {"expr", "tz"}}` (an IANA zone).
            overlap (ScheduleOverlap): While the previous run is unfinished: the slot is skipped, buffered (one; it runs
                when the previous ends), runs beside it, or cancels it.
            catch_up (str): Which of the slots due at once (after downtime) run: `latest` (the newest), `one` (the oldest)
                or `all:N` (the newest N); the others are recorded `missed`.
            priority (int):
            paused (bool):
            next_at (datetime.datetime): The next slot; it only moves forward.
            created_at (datetime.datetime):
            thread (str | Unset):
            tenant (str | Unset):
            created_by (str | Unset):
    """

    name: str
    crew: str
    fingerprint: str
    input_: Any
    cadence: CadenceCron | CadenceEvery
    overlap: ScheduleOverlap
    catch_up: str
    priority: int
    paused: bool
    next_at: datetime.datetime
    created_at: datetime.datetime
    thread: str | Unset = UNSET
    tenant: str | Unset = UNSET
    created_by: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.cadence_every import CadenceEvery

        name = self.name

        crew = self.crew

        fingerprint = self.fingerprint

        input_ = self.input_

        cadence: dict[str, Any]
        if isinstance(self.cadence, CadenceEvery):
            cadence = self.cadence.to_dict()
        else:
            cadence = self.cadence.to_dict()

        overlap = self.overlap.value

        catch_up = self.catch_up

        priority = self.priority

        paused = self.paused

        next_at = self.next_at.isoformat()

        created_at = self.created_at.isoformat()

        thread = self.thread

        tenant = self.tenant

        created_by = self.created_by

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "name": name,
                "crew": crew,
                "fingerprint": fingerprint,
                "input": input_,
                "cadence": cadence,
                "overlap": overlap,
                "catch_up": catch_up,
                "priority": priority,
                "paused": paused,
                "next_at": next_at,
                "created_at": created_at,
            }
        )
        if thread is not UNSET:
            field_dict["thread"] = thread
        if tenant is not UNSET:
            field_dict["tenant"] = tenant
        if created_by is not UNSET:
            field_dict["created_by"] = created_by

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.cadence_cron import CadenceCron
        from ..models.cadence_every import CadenceEvery

        d = dict(src_dict)
        name = d.pop("name")

        crew = d.pop("crew")

        fingerprint = d.pop("fingerprint")

        input_ = d.pop("input")

        def _parse_cadence(data: object) -> CadenceCron | CadenceEvery:
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                componentsschemas_cadence_type_0 = CadenceEvery.from_dict(data)

                return componentsschemas_cadence_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            if not isinstance(data, dict):
                raise TypeError()
            componentsschemas_cadence_type_1 = CadenceCron.from_dict(data)

            return componentsschemas_cadence_type_1

        cadence = _parse_cadence(d.pop("cadence"))

        overlap = ScheduleOverlap(d.pop("overlap"))

        catch_up = d.pop("catch_up")

        priority = d.pop("priority")

        paused = d.pop("paused")

        next_at = datetime.datetime.fromisoformat(d.pop("next_at"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        thread = d.pop("thread", UNSET)

        tenant = d.pop("tenant", UNSET)

        created_by = d.pop("created_by", UNSET)

        schedule = cls(
            name=name,
            crew=crew,
            fingerprint=fingerprint,
            input_=input_,
            cadence=cadence,
            overlap=overlap,
            catch_up=catch_up,
            priority=priority,
            paused=paused,
            next_at=next_at,
            created_at=created_at,
            thread=thread,
            tenant=tenant,
            created_by=created_by,
        )

        schedule.additional_properties = d
        return schedule

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
