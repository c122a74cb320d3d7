from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.signal_start import SignalStart


T = TypeVar("T", bound="SignalRequest")


@_attrs_define
class SignalRequest:
    """
    Attributes:
        target (str): A run id, `key:IDEMPOTENCY_KEY` or `thread:ID`.
        name (str): The signal's name (1 to 256 bytes).
        payload (Any | Unset): Any JSON (default null): the waiting step's output.
        id (str | Unset): An idempotency id (1 to 256 bytes): a second send of it is a no-op that answers the first.
            Default: one the server makes.
        start (SignalStart | Unset): Signal-with-submit: with no unfinished run at a `key:` or `thread:` target, start a
            run of this crew (under that key, or on that thread) and give it the signal.
        traceparent (str | Unset): The sender's W3C `traceparent`; without one, the request's `traceparent` header. The
            run's trace links the sender's span (its `cairn.signal.received` span).
    """

    target: str
    name: str
    payload: Any | Unset = UNSET
    id: str | Unset = UNSET
    start: SignalStart | Unset = UNSET
    traceparent: str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        target = self.target

        name = self.name

        payload = self.payload

        id = self.id

        start: dict[str, Any] | Unset = UNSET
        if not isinstance(self.start, Unset):
            start = self.start.to_dict()

        traceparent = self.traceparent

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "target": target,
                "name": name,
            }
        )
        if payload is not UNSET:
            field_dict["payload"] = payload
        if id is not UNSET:
            field_dict["id"] = id
        if start is not UNSET:
            field_dict["start"] = start
        if traceparent is not UNSET:
            field_dict["traceparent"] = traceparent

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.signal_start import SignalStart

        d = dict(src_dict)
        target = d.pop("target")

        name = d.pop("name")

        payload = d.pop("payload", UNSET)

        id = d.pop("id", UNSET)

        _start = d.pop("start", UNSET)
        start: SignalStart | Unset
        if isinstance(_start, Unset):
            start = UNSET
        else:
            start = SignalStart.from_dict(_start)

        traceparent = d.pop("traceparent", UNSET)

        signal_request = cls(
            target=target,
            name=name,
            payload=payload,
            id=id,
            start=start,
            traceparent=traceparent,
        )

        return signal_request
