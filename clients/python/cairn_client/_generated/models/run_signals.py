from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.listening import Listening
    from ..models.signal import Signal


T = TypeVar("T", bound="RunSignals")


@_attrs_define
class RunSignals:
    """
    Attributes:
        signals (list[Signal]):
        listening (Listening | None | Unset):
    """

    signals: list[Signal]
    listening: Listening | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.listening import Listening

        signals = []
        for signals_item_data in self.signals:
            signals_item = signals_item_data.to_dict()
            signals.append(signals_item)

        listening: dict[str, Any] | None | Unset
        if isinstance(self.listening, Unset):
            listening = UNSET
        elif isinstance(self.listening, Listening):
            listening = self.listening.to_dict()
        else:
            listening = self.listening

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "signals": signals,
            }
        )
        if listening is not UNSET:
            field_dict["listening"] = listening

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.listening import Listening
        from ..models.signal import Signal

        d = dict(src_dict)
        signals = []
        _signals = d.pop("signals")
        for signals_item_data in _signals:
            signals_item = Signal.from_dict(signals_item_data)

            signals.append(signals_item)

        def _parse_listening(data: object) -> Listening | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                listening_type_0 = Listening.from_dict(data)

                return listening_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(Listening | None | Unset, data)

        listening = _parse_listening(d.pop("listening", UNSET))

        run_signals = cls(
            signals=signals,
            listening=listening,
        )

        run_signals.additional_properties = d
        return run_signals

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
