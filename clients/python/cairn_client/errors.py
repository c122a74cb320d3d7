"""Typed errors. Every error the client raises is a `CairnError`.

An HTTP error answer of the API becomes an `ApiError` (a subclass picked by
its status) carrying the API's stable `code`, its `message` and the HTTP
`status`. Branch on `code`, not on the message: codes are stable, messages
are for people. No error ever holds the client's token.
"""

from __future__ import annotations

from typing import Any


class CairnError(Exception):
    """The base of every error this package raises."""


class ApiError(CairnError):
    """The server answered with an error document `{"error": {"code", "message"}}`.

    Attributes:
        status: the HTTP status (400, 404, 409, ...).
        code: the API's stable error code (`unknown_crew`, `wait_closed`, ...).
        message: the server's text, for people.
        details: the whole `error` object (e.g. `run_id` and `open_wait` of
            `wait_closed`), fields the client does not know included.
        operation: the API operation that failed (`submitRun`, ...).
        retry_after: seconds the server asked to wait (`Retry-After`), if any.
    """

    def __init__(self, status: int, code: str, message: str, *, operation: str = "",
                 details: dict[str, Any] | None = None, retry_after: float | None = None):
        self.status = status
        self.code = code
        self.message = message
        self.operation = operation
        self.details = details or {"code": code, "message": message}
        self.retry_after = retry_after
        where = f"{operation}: " if operation else ""
        super().__init__(f"{where}{status} {code}: {message}")


class BadRequest(ApiError):
    """400: a malformed request (`bad_json`, `invalid_body`, `bad_query`, ...)."""


class Unauthorized(ApiError):
    """401: no token, or a wrong one."""


class Forbidden(ApiError):
    """403: the token's principal may not do this (`forbidden`, `not_an_approver`)."""


class NotFound(ApiError):
    """404: no such run, wait, thread, crew, ... (`run_not_found`, `unknown_crew`, ...)."""


class Conflict(ApiError):
    """409: the state refuses it (`wait_closed`, `wrong_state`, `thread_busy`, ...)."""


class Unprocessable(ApiError):
    """422: a well-formed request the state refuses (`bad_answer`, `bad_context`, `bad_budget`)."""


class TooManyRequests(ApiError):
    """429 (`too_many_attempts`), still refused after the client's bounded retries."""


class ServiceUnavailable(ApiError):
    """503 (`unavailable`, `too_many_streams`, ...), still refused after the client's retries."""


class ServerError(ApiError):
    """Any other 5xx (`internal`)."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict,
    422: Unprocessable, 429: TooManyRequests, 503: ServiceUnavailable,
}


def api_error_class(status: int) -> type[ApiError]:
    """The `ApiError` subclass for an HTTP status."""
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    return ServerError if status >= 500 else ApiError


class UnsupportedByServer(CairnError):
    """The server is older than this client: it lacks an operation, a field or a parameter.

    Raised instead of the server's bare 404 or 400 once the server's own API
    document (`GET /v1/openapi.json`) confirms that it does not have what the
    client sent. `operation` is the API operation (`forkRun`, ...), `missing`
    what the server lacks (the route, or a field or parameter name).
    """

    def __init__(self, operation: str, missing: str, server_version: str | None = None):
        self.operation = operation
        self.missing = missing
        self.server_version = server_version
        seen = f" (its API document says version {server_version})" if server_version else ""
        super().__init__(
            f"the server does not support {operation}: it lacks {missing}{seen}; "
            "this client is newer than the server: upgrade the server, or leave the feature out"
        )


class ResponseNotUnderstood(CairnError):
    """A success answer this client's models cannot read (say, a newer enum value)."""

    def __init__(self, operation: str, reason: str):
        self.operation = operation
        super().__init__(f"{operation}: the server's answer does not fit this client's models "
                         f"({reason}); the server may be newer: upgrade cairn-client")


class WaitTimeout(CairnError, TimeoutError):
    """`wait()` gave up: the run did not reach the state in time. `run` is its last view."""

    def __init__(self, run_id: str, until: str, timeout: float, run: Any = None):
        self.run_id = run_id
        self.until = until
        self.run = run
        status = getattr(run, "status", None)
        super().__init__(f"run {run_id} is not {until} after {timeout:g} s (it is {status})")


class ConnectionLost(CairnError):
    """`watch()` could not get the event stream back after its bounded reconnects."""


__all__ = [
    "ApiError", "BadRequest", "CairnError", "Conflict", "ConnectionLost", "Forbidden",
    "NotFound", "ResponseNotUnderstood", "ServerError", "ServiceUnavailable",
    "TooManyRequests", "Unauthorized", "Unprocessable", "UnsupportedByServer", "WaitTimeout",
    "api_error_class",
]
