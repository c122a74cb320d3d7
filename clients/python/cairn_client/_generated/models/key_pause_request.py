from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="KeyPauseRequest")


@_attrs_define
class KeyPauseRequest:
    """
    Attributes:
        key (str): The provider key. At most 1 KiB (1,024 bytes) of printable text: an empty key, a longer one or one
            with a control character is 400 `bad_key`.
        for_ (str): How long from now, as the CLI writes ages: `10m`, `30s`, `250ms`; at most `36500d` (100 years;
            longer is 400 `bad_age`). A longer pause already standing wins. An operator's pause is not capped by the key's
            `max_pause_ms`.
        by (str | Unset): A note on who asked, kept on the event as `note`: the actor recorded is the token's principal
            (`api` for a token of `CAIRN_API_TOKENS`), never this.
        reason (str | Unset):
    """

    key: str
    for_: str
    by: str | Unset = UNSET
    reason: str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        for_ = self.for_

        by = self.by

        reason = self.reason

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "key": key,
                "for": for_,
            }
        )
        if by is not UNSET:
            field_dict["by"] = by
        if reason is not UNSET:
            field_dict["reason"] = reason

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        key = d.pop("key")

        for_ = d.pop("for")

        by = d.pop("by", UNSET)

        reason = d.pop("reason", UNSET)

        key_pause_request = cls(
            key=key,
            for_=for_,
            by=by,
            reason=reason,
        )

        return key_pause_request
