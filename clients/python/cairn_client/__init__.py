"""cairn-client: the Python client of Cairn's HTTP API.

    from cairn_client import Client

    with Client("http://127.0.0.1:7700", token) as cairn:
        run = cairn.submit("review", {"topic": "durable agents"}, key="order-42")
        run = cairn.wait(run.id, until="stopped")

`Client` is synchronous, `AsyncClient` its asyncio/trio twin. Results are
the typed models generated from docs/openapi.json (`cairn_client.models`);
errors are the typed exceptions of `cairn_client.errors`. The generated
operations, every one of the API, are `cairn_client.api` (call them with
`client.raw`).
"""

from . import errors, models
from ._ops import Page
from ._retry import RetryPolicy
from .aio import AsyncClient
from .client import VERSION as __version__
from .client import Client
from .errors import (
    ApiError,
    BadRequest,
    CairnError,
    Conflict,
    ConnectionLost,
    Forbidden,
    NotFound,
    ResponseNotUnderstood,
    ServerError,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    Unprocessable,
    UnsupportedByServer,
    WaitTimeout,
)
from .events import Event, OutputDelta, RunEvent

__all__ = [
    "ApiError", "AsyncClient", "BadRequest", "CairnError", "Client", "Conflict",
    "ConnectionLost", "Event", "Forbidden", "NotFound", "OutputDelta", "Page",
    "ResponseNotUnderstood", "RetryPolicy", "RunEvent", "ServerError", "ServiceUnavailable",
    "TooManyRequests", "Unauthorized", "Unprocessable", "UnsupportedByServer", "WaitTimeout",
    "__version__", "errors", "models",
]
