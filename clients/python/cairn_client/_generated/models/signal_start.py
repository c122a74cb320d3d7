from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="SignalStart")


@_attrs_define
class SignalStart:
    """Signal-with-submit: with no unfinished run at a `key:` or `thread:` target, start a run of this crew (under that
    key, or on that thread) and give it the signal.

        Attributes:
            crew (str): A crew this server loaded, by name.
            version (str | Unset): Its version (default: the newest loaded).
            input_ (Any | Unset): The run's input (default: the signal's payload).
    """

    crew: str
    version: str | Unset = UNSET
    input_: Any | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        crew = self.crew

        version = self.version

        input_ = self.input_

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "crew": crew,
            }
        )
        if version is not UNSET:
            field_dict["version"] = version
        if input_ is not UNSET:
            field_dict["input"] = input_

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        crew = d.pop("crew")

        version = d.pop("version", UNSET)

        input_ = d.pop("input", UNSET)

        signal_start = cls(
            crew=crew,
            version=version,
            input_=input_,
        )

        return signal_start
