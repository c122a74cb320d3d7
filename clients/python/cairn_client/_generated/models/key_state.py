from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.key_state_limits_from import KeyStateLimitsFrom
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.key_limits import KeyLimits


T = TypeVar("T", bound="KeyState")


@_attrs_define
class KeyState:
    """
    Attributes:
        key (str): The provider key: `provider=openai,url=https://api.openai.com/v1,key=OPENAI_API_KEY` (the API key
            variable's name, never its value); a scripted provider's is `provider=scripted,script=PATH`.
        paused_until (datetime.datetime | None):
        reason (None | str): Why it was last paused: the provider's answer, or an operator's reason. A provider's pause
            held to the key's `max_pause_ms` says so: `(the provider asked for 999999999s; capped at 15m, the key's
            max_pause)`.
        paused_by (None | str): `provider` for a rate limit, else the operator.
        paused_at (datetime.datetime | None):
        pauses (int): How many pauses began.
        deferred_runs (int): Queued runs deferred on the key, waiting for its pause to end or a permit (its queue
            depth).
        limits (KeyLimits): A provider key's limits, shared by every process on the database; a limit absent is no
            limit. Requests and tokens per minute are buckets holding at most a minute's worth, refilled continuously.
        permits_in_use (int): Permits held now by model calls executing on the key (runs whose lease still stands).
        limits_from (KeyStateLimitsFrom | Unset): Who set its limits: `operator` (`cairn limits set`, which wins until
            `cairn limits reset`), `crew` (an agent's `limits` in a crew file, over the process's file) or `config` (the
            executing process's `CAIRN_LIMITS` file). Absent when it has none.
    """

    key: str
    paused_until: datetime.datetime | None
    reason: None | str
    paused_by: None | str
    paused_at: datetime.datetime | None
    pauses: int
    deferred_runs: int
    limits: KeyLimits
    permits_in_use: int
    limits_from: KeyStateLimitsFrom | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        paused_until: None | str
        if isinstance(self.paused_until, datetime.datetime):
            paused_until = self.paused_until.isoformat()
        else:
            paused_until = self.paused_until

        reason: None | str
        reason = self.reason

        paused_by: None | str
        paused_by = self.paused_by

        paused_at: None | str
        if isinstance(self.paused_at, datetime.datetime):
            paused_at = self.paused_at.isoformat()
        else:
            paused_at = self.paused_at

        pauses = self.pauses

        deferred_runs = self.deferred_runs

        limits = self.limits.to_dict()

        permits_in_use = self.permits_in_use

        limits_from: str | Unset = UNSET
        if not isinstance(self.limits_from, Unset):
            limits_from = self.limits_from.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "key": key,
                "paused_until": paused_until,
                "reason": reason,
                "paused_by": paused_by,
                "paused_at": paused_at,
                "pauses": pauses,
                "deferred_runs": deferred_runs,
                "limits": limits,
                "permits_in_use": permits_in_use,
            }
        )
        if limits_from is not UNSET:
            field_dict["limits_from"] = limits_from

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.key_limits import KeyLimits

        d = dict(src_dict)
        key = d.pop("key")

        def _parse_paused_until(data: object) -> datetime.datetime | None:
            if data is None:
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
            return cast(datetime.datetime | None, data)

        paused_until = _parse_paused_until(d.pop("paused_until"))

        def _parse_reason(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        reason = _parse_reason(d.pop("reason"))

        def _parse_paused_by(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        paused_by = _parse_paused_by(d.pop("paused_by"))

        def _parse_paused_at(data: object) -> datetime.datetime | None:
            if data is None:
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
            return cast(datetime.datetime | None, data)

        paused_at = _parse_paused_at(d.pop("paused_at"))

        pauses = d.pop("pauses")

        deferred_runs = d.pop("deferred_runs")

        limits = KeyLimits.from_dict(d.pop("limits"))

        permits_in_use = d.pop("permits_in_use")

        _limits_from = d.pop("limits_from", UNSET)
        limits_from: KeyStateLimitsFrom | Unset
        if isinstance(_limits_from, Unset):
            limits_from = UNSET
        else:
            limits_from = KeyStateLimitsFrom(_limits_from)

        key_state = cls(
            key=key,
            paused_until=paused_until,
            reason=reason,
            paused_by=paused_by,
            paused_at=paused_at,
            pauses=pauses,
            deferred_runs=deferred_runs,
            limits=limits,
            permits_in_use=permits_in_use,
            limits_from=limits_from,
        )

        key_state.additional_properties = d
        return key_state

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
