from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.error_response_error_reason import ErrorResponseErrorReason
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.error_response_error_open_wait_type_0 import (
        ErrorResponseErrorOpenWaitType0,
    )


T = TypeVar("T", bound="ErrorResponseError")


@_attrs_define
class ErrorResponseError:
    """
    Attributes:
        code (str): Stable: bad_json, invalid_body, bad_body, unsupported_media_type, too_large, request_timeout,
            bad_query, bad_cursor, bad_last_event_id, bad_run_id, bad_wait_id, bad_thread_id, bad_tenant, bad_limit,
            bad_key, bad_age, bad_principal, host_not_allowed, unstorable, unknown_crew, crew_not_offered,
            crew_version_not_found, run_not_found, wait_not_found, thread_not_found, key_not_found, principal_not_found,
            not_found, method_not_allowed, unauthorized, forbidden, not_an_approver, too_many_attempts,
            idempotency_conflict, principal_exists, already_voted, stale_digest, schedule_not_found, schedule_exists,
            bad_schedule, no_signal_target, ambiguous_target, bad_signal, hook_not_found, hook_unauthorized, bad_delivery,
            value_not_found, thread_busy, wrong_state, crew_mismatch, fork_refused, wait_closed, bad_answer, bad_context,
            bad_budget, not_ready, unavailable, too_many_streams, too_many_connections, internal. Every other 5xx than 503
            is `internal` (what failed is in the server's log). The engine's codes `queued_behind` and `wrong_thread`
            (`cairn resume`) belong to the command line, and `crew_incompatible` to the library (`runs upgrade` and `POST
            /v1/crews/{name}/upgrade` report it per run, in `reason`); no route returns them; nor `hook_exists` and
            `bad_hook`, which `cairn hooks create` (on the database only) reports.
        message (str): For people; may change.
        reason (ErrorResponseErrorReason | Unset): `not_ready` only: why the server is not ready. `no_answer`: the
            database does not answer; `read_only`: it answers but takes no writes (a standby, or a primary set read-only).
        run_id (UUID | Unset): `wait_closed` only: the run of the closed wait.
        open_wait (ErrorResponseErrorOpenWaitType0 | None | Unset): `wait_closed` only: the open wait of the same run
            (`id`, `kind`, `step_idx`), the one a person most likely meant (a rejected review's re-run opens a new one);
            `null` when the run has none.
    """

    code: str
    message: str
    reason: ErrorResponseErrorReason | Unset = UNSET
    run_id: UUID | Unset = UNSET
    open_wait: ErrorResponseErrorOpenWaitType0 | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.error_response_error_open_wait_type_0 import (
            ErrorResponseErrorOpenWaitType0,
        )

        code = self.code

        message = self.message

        reason: str | Unset = UNSET
        if not isinstance(self.reason, Unset):
            reason = self.reason.value

        run_id: str | Unset = UNSET
        if not isinstance(self.run_id, Unset):
            run_id = str(self.run_id)

        open_wait: dict[str, Any] | None | Unset
        if isinstance(self.open_wait, Unset):
            open_wait = UNSET
        elif isinstance(self.open_wait, ErrorResponseErrorOpenWaitType0):
            open_wait = self.open_wait.to_dict()
        else:
            open_wait = self.open_wait

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "code": code,
                "message": message,
            }
        )
        if reason is not UNSET:
            field_dict["reason"] = reason
        if run_id is not UNSET:
            field_dict["run_id"] = run_id
        if open_wait is not UNSET:
            field_dict["open_wait"] = open_wait

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.error_response_error_open_wait_type_0 import (
            ErrorResponseErrorOpenWaitType0,
        )

        d = dict(src_dict)
        code = d.pop("code")

        message = d.pop("message")

        _reason = d.pop("reason", UNSET)
        reason: ErrorResponseErrorReason | Unset
        if isinstance(_reason, Unset):
            reason = UNSET
        else:
            reason = ErrorResponseErrorReason(_reason)

        _run_id = d.pop("run_id", UNSET)
        run_id: UUID | Unset
        if isinstance(_run_id, Unset):
            run_id = UNSET
        else:
            run_id = UUID(_run_id)

        def _parse_open_wait(
            data: object,
        ) -> ErrorResponseErrorOpenWaitType0 | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                open_wait_type_0 = ErrorResponseErrorOpenWaitType0.from_dict(data)

                return open_wait_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ErrorResponseErrorOpenWaitType0 | None | Unset, data)

        open_wait = _parse_open_wait(d.pop("open_wait", UNSET))

        error_response_error = cls(
            code=code,
            message=message,
            reason=reason,
            run_id=run_id,
            open_wait=open_wait,
        )

        error_response_error.additional_properties = d
        return error_response_error

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
