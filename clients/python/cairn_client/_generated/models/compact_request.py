from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="CompactRequest")


@_attrs_define
class CompactRequest:
    """A retention policy; at least one criterion. Nothing a queued, running, waiting or interrupted run needs is ever
    removed; a failed run only by `failed_older_than`.

        Example:
            {'finished_older_than': '30d', 'journals': True}

        Attributes:
            events_older_than (None | str | Unset): Events of any run older than this. An age: a whole number and a unit
                (`ms`, `s`, `m`, `h`, `d`), as in `30d`, `12h`, `0s`.
            journals (bool | Unset): Journals of finished (succeeded or cancelled) runs.
            finished_older_than (None | str | Unset): Whole succeeded or cancelled runs (steps, events, journals, waits)
                finished longer ago than this. An age: a whole number and a unit (`ms`, `s`, `m`, `h`, `d`), as in `30d`, `12h`,
                `0s`.
            failed_older_than (None | str | Unset): Whole failed runs finished longer ago than this. An age: a whole number
                and a unit (`ms`, `s`, `m`, `h`, `d`), as in `30d`, `12h`, `0s`.
            keep_per_thread (int | None | Unset): Whole finished runs of a thread beyond its newest N.
            dry_run (bool | Unset): Count what would be removed; remove nothing.
    """

    events_older_than: None | str | Unset = UNSET
    journals: bool | Unset = UNSET
    finished_older_than: None | str | Unset = UNSET
    failed_older_than: None | str | Unset = UNSET
    keep_per_thread: int | None | Unset = UNSET
    dry_run: bool | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        events_older_than: None | str | Unset
        if isinstance(self.events_older_than, Unset):
            events_older_than = UNSET
        else:
            events_older_than = self.events_older_than

        journals = self.journals

        finished_older_than: None | str | Unset
        if isinstance(self.finished_older_than, Unset):
            finished_older_than = UNSET
        else:
            finished_older_than = self.finished_older_than

        failed_older_than: None | str | Unset
        if isinstance(self.failed_older_than, Unset):
            failed_older_than = UNSET
        else:
            failed_older_than = self.failed_older_than

        keep_per_thread: int | None | Unset
        if isinstance(self.keep_per_thread, Unset):
            keep_per_thread = UNSET
        else:
            keep_per_thread = self.keep_per_thread

        dry_run = self.dry_run

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if events_older_than is not UNSET:
            field_dict["events_older_than"] = events_older_than
        if journals is not UNSET:
            field_dict["journals"] = journals
        if finished_older_than is not UNSET:
            field_dict["finished_older_than"] = finished_older_than
        if failed_older_than is not UNSET:
            field_dict["failed_older_than"] = failed_older_than
        if keep_per_thread is not UNSET:
            field_dict["keep_per_thread"] = keep_per_thread
        if dry_run is not UNSET:
            field_dict["dry_run"] = dry_run

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)

        def _parse_events_older_than(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        events_older_than = _parse_events_older_than(d.pop("events_older_than", UNSET))

        journals = d.pop("journals", UNSET)

        def _parse_finished_older_than(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        finished_older_than = _parse_finished_older_than(
            d.pop("finished_older_than", UNSET)
        )

        def _parse_failed_older_than(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        failed_older_than = _parse_failed_older_than(d.pop("failed_older_than", UNSET))

        def _parse_keep_per_thread(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        keep_per_thread = _parse_keep_per_thread(d.pop("keep_per_thread", UNSET))

        dry_run = d.pop("dry_run", UNSET)

        compact_request = cls(
            events_older_than=events_older_than,
            journals=journals,
            finished_older_than=finished_older_than,
            failed_older_than=failed_older_than,
            keep_per_thread=keep_per_thread,
            dry_run=dry_run,
        )

        return compact_request
