from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CreateScheduleRequest")


@_attrs_define
class CreateScheduleRequest:
    """Exactly one of `every` and `cron`.

    Attributes:
        name (str): 1 to 64 letters, digits, `-`, `_` or `.`.
        crew (str): A crew the server loaded.
        crew_version (None | str | Unset):
        input_ (Any | Unset): The input template (default `{}`).
        every (None | str | Unset): An interval: `30s`, `5m`, `1h`.
        cron (None | str | Unset): 5 fields, or 6 with seconds first.
        tz (None | str | Unset): The cron expression's IANA zone (default UTC).
        overlap (None | str | Unset): skip (default), buffer, allow, cancel.
        catch_up (None | str | Unset): latest (default), one, all:N.
        thread (None | str | Unset):
        priority (int | None | Unset):
        tenant (None | str | Unset):
    """

    name: str
    crew: str
    crew_version: None | str | Unset = UNSET
    input_: Any | Unset = UNSET
    every: None | str | Unset = UNSET
    cron: None | str | Unset = UNSET
    tz: None | str | Unset = UNSET
    overlap: None | str | Unset = UNSET
    catch_up: None | str | Unset = UNSET
    thread: None | str | Unset = UNSET
    priority: int | None | Unset = UNSET
    tenant: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        name = self.name

        crew = self.crew

        crew_version: None | str | Unset
        if isinstance(self.crew_version, Unset):
            crew_version = UNSET
        else:
            crew_version = self.crew_version

        input_ = self.input_

        every: None | str | Unset
        if isinstance(self.every, Unset):
            every = UNSET
        else:
            every = self.every

        cron: None | str | Unset
        if isinstance(self.cron, Unset):
            cron = UNSET
        else:
            cron = self.cron

        tz: None | str | Unset
        if isinstance(self.tz, Unset):
            tz = UNSET
        else:
            tz = self.tz

        overlap: None | str | Unset
        if isinstance(self.overlap, Unset):
            overlap = UNSET
        else:
            overlap = self.overlap

        catch_up: None | str | Unset
        if isinstance(self.catch_up, Unset):
            catch_up = UNSET
        else:
            catch_up = self.catch_up

        thread: None | str | Unset
        if isinstance(self.thread, Unset):
            thread = UNSET
        else:
            thread = self.thread

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

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "name": name,
                "crew": crew,
            }
        )
        if crew_version is not UNSET:
            field_dict["crew_version"] = crew_version
        if input_ is not UNSET:
            field_dict["input"] = input_
        if every is not UNSET:
            field_dict["every"] = every
        if cron is not UNSET:
            field_dict["cron"] = cron
        if tz is not UNSET:
            field_dict["tz"] = tz
        if overlap is not UNSET:
            field_dict["overlap"] = overlap
        if catch_up is not UNSET:
            field_dict["catch_up"] = catch_up
        if thread is not UNSET:
            field_dict["thread"] = thread
        if priority is not UNSET:
            field_dict["priority"] = priority
        if tenant is not UNSET:
            field_dict["tenant"] = tenant

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        name = d.pop("name")

        crew = d.pop("crew")

        def _parse_crew_version(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        crew_version = _parse_crew_version(d.pop("crew_version", UNSET))

        input_ = d.pop("input", UNSET)

        def _parse_every(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        every = _parse_every(d.pop("every", UNSET))

        def _parse_cron(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        cron = _parse_cron(d.pop("cron", UNSET))

        def _parse_tz(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        tz = _parse_tz(d.pop("tz", UNSET))

        def _parse_overlap(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        overlap = _parse_overlap(d.pop("overlap", UNSET))

        def _parse_catch_up(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        catch_up = _parse_catch_up(d.pop("catch_up", UNSET))

        def _parse_thread(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        thread = _parse_thread(d.pop("thread", UNSET))

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

        create_schedule_request = cls(
            name=name,
            crew=crew,
            crew_version=crew_version,
            input_=input_,
            every=every,
            cron=cron,
            tz=tz,
            overlap=overlap,
            catch_up=catch_up,
            thread=thread,
            priority=priority,
            tenant=tenant,
        )

        return create_schedule_request
