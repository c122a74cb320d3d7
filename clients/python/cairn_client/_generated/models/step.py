from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.step_status import StepStatus
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.error_info import ErrorInfo


T = TypeVar("T", bound="Step")


@_attrs_define
class Step:
    """A checkpoint row.

    Attributes:
        idx (int):
        role (str):
        status (StepStatus):
        attempt (int):
        started_at (datetime.datetime):
        takeovers (int): How often this attempt was resumed after its process died.
        output (Any | Unset): The step's output (JSON, or a string): null until it succeeded, except that a step
            `waiting` for review holds the output under review.
        input_tokens (int | None | Unset):
        output_tokens (int | None | Unset):
        cost_usd (float | Unset): What the step's priced model calls cost, in US dollars (the executing process's
            `CAIRN_PRICES`; its children's included, as its tokens are). Absent when none was priced.
        finished_at (datetime.datetime | None | Unset):
        error (ErrorInfo | None | Unset):
    """

    idx: int
    role: str
    status: StepStatus
    attempt: int
    started_at: datetime.datetime
    takeovers: int
    output: Any | Unset = UNSET
    input_tokens: int | None | Unset = UNSET
    output_tokens: int | None | Unset = UNSET
    cost_usd: float | Unset = UNSET
    finished_at: datetime.datetime | None | Unset = UNSET
    error: ErrorInfo | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.error_info import ErrorInfo

        idx = self.idx

        role = self.role

        status = self.status.value

        attempt = self.attempt

        started_at = self.started_at.isoformat()

        takeovers = self.takeovers

        output = self.output

        input_tokens: int | None | Unset
        if isinstance(self.input_tokens, Unset):
            input_tokens = UNSET
        else:
            input_tokens = self.input_tokens

        output_tokens: int | None | Unset
        if isinstance(self.output_tokens, Unset):
            output_tokens = UNSET
        else:
            output_tokens = self.output_tokens

        cost_usd = self.cost_usd

        finished_at: None | str | Unset
        if isinstance(self.finished_at, Unset):
            finished_at = UNSET
        elif isinstance(self.finished_at, datetime.datetime):
            finished_at = self.finished_at.isoformat()
        else:
            finished_at = self.finished_at

        error: dict[str, Any] | None | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        elif isinstance(self.error, ErrorInfo):
            error = self.error.to_dict()
        else:
            error = self.error

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "idx": idx,
                "role": role,
                "status": status,
                "attempt": attempt,
                "started_at": started_at,
                "takeovers": takeovers,
            }
        )
        if output is not UNSET:
            field_dict["output"] = output
        if input_tokens is not UNSET:
            field_dict["input_tokens"] = input_tokens
        if output_tokens is not UNSET:
            field_dict["output_tokens"] = output_tokens
        if cost_usd is not UNSET:
            field_dict["cost_usd"] = cost_usd
        if finished_at is not UNSET:
            field_dict["finished_at"] = finished_at
        if error is not UNSET:
            field_dict["error"] = error

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.error_info import ErrorInfo

        d = dict(src_dict)
        idx = d.pop("idx")

        role = d.pop("role")

        status = StepStatus(d.pop("status"))

        attempt = d.pop("attempt")

        started_at = datetime.datetime.fromisoformat(d.pop("started_at"))

        takeovers = d.pop("takeovers")

        output = d.pop("output", UNSET)

        def _parse_input_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        input_tokens = _parse_input_tokens(d.pop("input_tokens", UNSET))

        def _parse_output_tokens(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        output_tokens = _parse_output_tokens(d.pop("output_tokens", UNSET))

        cost_usd = d.pop("cost_usd", UNSET)

        def _parse_finished_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
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
            return cast(datetime.datetime | None | Unset, data)

        finished_at = _parse_finished_at(d.pop("finished_at", UNSET))

        def _parse_error(data: object) -> ErrorInfo | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                error_type_0 = ErrorInfo.from_dict(data)

                return error_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ErrorInfo | None | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        step = cls(
            idx=idx,
            role=role,
            status=status,
            attempt=attempt,
            started_at=started_at,
            takeovers=takeovers,
            output=output,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost_usd,
            finished_at=finished_at,
            error=error,
        )

        step.additional_properties = d
        return step

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
