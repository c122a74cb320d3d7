from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="KeyLimitsRequest")


@_attrs_define
class KeyLimitsRequest:
    """
    Attributes:
        key (str): The provider key, as `GET /v1/limits` lists it or as a step builds it. At most 1 KiB (1,024 bytes) of
            printable text: an empty key, a longer one or one with a control character is 400 `bad_key`.
        in_flight (int | None | Unset):
        rpm (int | None | Unset):
        tpm (int | None | Unset):
        by (str | Unset): A note on who asked, kept on the event as `note`: the actor recorded is the token's principal
            (`api` for a token of `CAIRN_API_TOKENS`), never this.
        max_pause_ms (int | None | Unset): The longest a provider's answer may pause the key, in milliseconds (default
            15 minutes).
    """

    key: str
    in_flight: int | None | Unset = UNSET
    rpm: int | None | Unset = UNSET
    tpm: int | None | Unset = UNSET
    by: str | Unset = UNSET
    max_pause_ms: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        in_flight: int | None | Unset
        if isinstance(self.in_flight, Unset):
            in_flight = UNSET
        else:
            in_flight = self.in_flight

        rpm: int | None | Unset
        if isinstance(self.rpm, Unset):
            rpm = UNSET
        else:
            rpm = self.rpm

        tpm: int | None | Unset
        if isinstance(self.tpm, Unset):
            tpm = UNSET
        else:
            tpm = self.tpm

        by = self.by

        max_pause_ms: int | None | Unset
        if isinstance(self.max_pause_ms, Unset):
            max_pause_ms = UNSET
        else:
            max_pause_ms = self.max_pause_ms

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "key": key,
            }
        )
        if in_flight is not UNSET:
            field_dict["in_flight"] = in_flight
        if rpm is not UNSET:
            field_dict["rpm"] = rpm
        if tpm is not UNSET:
            field_dict["tpm"] = tpm
        if by is not UNSET:
            field_dict["by"] = by
        if max_pause_ms is not UNSET:
            field_dict["max_pause_ms"] = max_pause_ms

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        key = d.pop("key")

        def _parse_in_flight(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        in_flight = _parse_in_flight(d.pop("in_flight", UNSET))

        def _parse_rpm(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        rpm = _parse_rpm(d.pop("rpm", UNSET))

        def _parse_tpm(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        tpm = _parse_tpm(d.pop("tpm", UNSET))

        by = d.pop("by", UNSET)

        def _parse_max_pause_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_pause_ms = _parse_max_pause_ms(d.pop("max_pause_ms", UNSET))

        key_limits_request = cls(
            key=key,
            in_flight=in_flight,
            rpm=rpm,
            tpm=tpm,
            by=by,
            max_pause_ms=max_pause_ms,
        )

        return key_limits_request
