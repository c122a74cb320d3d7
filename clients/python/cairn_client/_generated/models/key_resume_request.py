from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="KeyResumeRequest")


@_attrs_define
class KeyResumeRequest:
    """
    Attributes:
        key (str):
        by (str | Unset): A note on who asked, kept on the event as `note`: the actor recorded is the token's principal
            (`api` for a token of `CAIRN_API_TOKENS`), never this.
    """

    key: str
    by: str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        key = self.key

        by = self.by

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "key": key,
            }
        )
        if by is not UNSET:
            field_dict["by"] = by

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        key = d.pop("key")

        by = d.pop("by", UNSET)

        key_resume_request = cls(
            key=key,
            by=by,
        )

        return key_resume_request
