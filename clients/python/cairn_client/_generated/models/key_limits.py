from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="KeyLimits")


@_attrs_define
class KeyLimits:
    """A provider key's limits, shared by every process on the database; a limit absent is no limit. Requests and tokens
    per minute are buckets holding at most a minute's worth, refilled continuously.

        Attributes:
            in_flight (int | Unset): Model calls executing at once on the key.
            rpm (int | Unset): Requests per minute.
            tpm (int | Unset): Tokens per minute: a call reserves its estimate (its input estimated, plus its max_tokens)
                and settles its real usage after it.
            max_pause_ms (int | Unset): The longest a provider's answer (`Retry-After`, reset headers) may pause the key, in
                milliseconds; 15 minutes (900000) when absent. Not a limit on calls: it takes no permit.
    """

    in_flight: int | Unset = UNSET
    rpm: int | Unset = UNSET
    tpm: int | Unset = UNSET
    max_pause_ms: int | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        in_flight = self.in_flight

        rpm = self.rpm

        tpm = self.tpm

        max_pause_ms = self.max_pause_ms

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if in_flight is not UNSET:
            field_dict["in_flight"] = in_flight
        if rpm is not UNSET:
            field_dict["rpm"] = rpm
        if tpm is not UNSET:
            field_dict["tpm"] = tpm
        if max_pause_ms is not UNSET:
            field_dict["max_pause_ms"] = max_pause_ms

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        in_flight = d.pop("in_flight", UNSET)

        rpm = d.pop("rpm", UNSET)

        tpm = d.pop("tpm", UNSET)

        max_pause_ms = d.pop("max_pause_ms", UNSET)

        key_limits = cls(
            in_flight=in_flight,
            rpm=rpm,
            tpm=tpm,
            max_pause_ms=max_pause_ms,
        )

        return key_limits
