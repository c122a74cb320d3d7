from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_response import ErrorResponse
from ...models.sent import Sent
from ...models.signal_request import SignalRequest
from ...types import Response


def _get_kwargs(
    *,
    body: SignalRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/signals",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | Sent | None:
    if response.status_code == 200:
        response_200 = Sent.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorResponse.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorResponse.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = ErrorResponse.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = ErrorResponse.from_dict(response.json())

        return response_404

    if response.status_code == 408:
        response_408 = ErrorResponse.from_dict(response.json())

        return response_408

    if response.status_code == 409:
        response_409 = ErrorResponse.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = ErrorResponse.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorResponse.from_dict(response.json())

        return response_415

    if response.status_code == 429:
        response_429 = ErrorResponse.from_dict(response.json())

        return response_429

    if response.status_code == 500:
        response_500 = ErrorResponse.from_dict(response.json())

        return response_500

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorResponse | Sent]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: SignalRequest,
) -> Response[ErrorResponse | Sent]:
    """Send a signal to a run

     Stores a named signal for the one unfinished run `target` names: a run id, `key:K` (the run
    submitted with idempotency key K) or `thread:T` (the one unfinished run of thread T). A `signal`
    step waiting for its name consumes it, now or once it waits (until then it is buffered, at most 7
    days and 1,000 per run); per run and name, oldest first. A second send with the same `id` stores
    nothing and answers the first (`duplicate`). With `start`, a target with no run starts one of that
    crew (signal-with-submit). Recorded on the run as `signal_received`, with the caller.

    Args:
        body (SignalRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | Sent]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    body: SignalRequest,
) -> ErrorResponse | Sent | None:
    """Send a signal to a run

     Stores a named signal for the one unfinished run `target` names: a run id, `key:K` (the run
    submitted with idempotency key K) or `thread:T` (the one unfinished run of thread T). A `signal`
    step waiting for its name consumes it, now or once it waits (until then it is buffered, at most 7
    days and 1,000 per run); per run and name, oldest first. A second send with the same `id` stores
    nothing and answers the first (`duplicate`). With `start`, a target with no run starts one of that
    crew (signal-with-submit). Recorded on the run as `signal_received`, with the caller.

    Args:
        body (SignalRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | Sent
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: SignalRequest,
) -> Response[ErrorResponse | Sent]:
    """Send a signal to a run

     Stores a named signal for the one unfinished run `target` names: a run id, `key:K` (the run
    submitted with idempotency key K) or `thread:T` (the one unfinished run of thread T). A `signal`
    step waiting for its name consumes it, now or once it waits (until then it is buffered, at most 7
    days and 1,000 per run); per run and name, oldest first. A second send with the same `id` stores
    nothing and answers the first (`duplicate`). With `start`, a target with no run starts one of that
    crew (signal-with-submit). Recorded on the run as `signal_received`, with the caller.

    Args:
        body (SignalRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | Sent]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: SignalRequest,
) -> ErrorResponse | Sent | None:
    """Send a signal to a run

     Stores a named signal for the one unfinished run `target` names: a run id, `key:K` (the run
    submitted with idempotency key K) or `thread:T` (the one unfinished run of thread T). A `signal`
    step waiting for its name consumes it, now or once it waits (until then it is buffered, at most 7
    days and 1,000 per run); per run and name, oldest first. A second send with the same `id` stores
    nothing and answers the first (`duplicate`). With `start`, a target with no run starts one of that
    crew (signal-with-submit). Recorded on the run as `signal_received`, with the caller.

    Args:
        body (SignalRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | Sent
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
