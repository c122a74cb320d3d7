from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.signal import Signal


T = TypeVar("T", bound="Sent")


@_attrs_define
class Sent:
    """
    Attributes:
        signal (Signal):
        duplicate (bool): Its id was sent before: nothing was stored; `signal` is the first.
        woke (bool): It woke the run, which was waiting for it.
        started (bool): This send started the run (`start`).
    """

    signal: Signal
    duplicate: bool
    woke: bool
    started: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        signal = self.signal.to_dict()

        duplicate = self.duplicate

        woke = self.woke

        started = self.started

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "signal": signal,
                "duplicate": duplicate,
                "woke": woke,
                "started": started,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.signal import Signal

        d = dict(src_dict)
        signal = Signal.from_dict(d.pop("signal"))

        duplicate = d.pop("duplicate")

        woke = d.pop("woke")

        started = d.pop("started")

        sent = cls(
            signal=signal,
            duplicate=duplicate,
            woke=woke,
            started=started,
        )

        sent.additional_properties = d
        return sent

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
