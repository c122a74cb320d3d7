from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_response import ErrorResponse
from ...models.fork_request import ForkRequest
from ...models.run_view import RunView
from ...types import Response


def _get_kwargs(
    id: UUID,
    *,
    body: ForkRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/runs/{id}/fork".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | RunView | None:
    if response.status_code == 201:
        response_201 = RunView.from_dict(response.json())

        return response_201

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
) -> Response[ErrorResponse | RunView]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient | Client,
    body: ForkRequest,
) -> Response[ErrorResponse | RunView]:
    """Fork a run

     Creates a new queued run of the same crew that copies the source run's checkpoints `0..from_step`
    verbatim, records `parent_run_id` and `parent_step_idx`, and executes from step `from_step` (the
    server's runner picks it up). The source run is not touched. `input` gives the fork a new run input,
    but only with `from_step = 0`: every copied output was computed from the old input. A refused fork
    is 409 `fork_refused`, never 422, even when the body alone shows it (a new input with `from_step >
    0`): whether a fork can be made is decided by the store against the source run's state in one
    transaction (how far it has got, how many steps its crew has), so every refusal is one code, and the
    message says why. Only runs of crews this server offers (`GET /v1/crews`, matched by fingerprint)
    unless the server allows foreign runs: a run stored by the CLI or another server on a shared
    database is 404 `crew_not_offered`, since acting on it would execute a crew this server never
    loaded. With `crew_version` the fork runs on that version of the crew instead (see `ForkRequest`).

    Args:
        id (UUID):
        body (ForkRequest):  Example: {'from_step': 1, 'by': 'ops@example.com', 'reason': 'try the
            new writer prompt'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | RunView]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: UUID,
    *,
    client: AuthenticatedClient | Client,
    body: ForkRequest,
) -> ErrorResponse | RunView | None:
    """Fork a run

     Creates a new queued run of the same crew that copies the source run's checkpoints `0..from_step`
    verbatim, records `parent_run_id` and `parent_step_idx`, and executes from step `from_step` (the
    server's runner picks it up). The source run is not touched. `input` gives the fork a new run input,
    but only with `from_step = 0`: every copied output was computed from the old input. A refused fork
    is 409 `fork_refused`, never 422, even when the body alone shows it (a new input with `from_step >
    0`): whether a fork can be made is decided by the store against the source run's state in one
    transaction (how far it has got, how many steps its crew has), so every refusal is one code, and the
    message says why. Only runs of crews this server offers (`GET /v1/crews`, matched by fingerprint)
    unless the server allows foreign runs: a run stored by the CLI or another server on a shared
    database is 404 `crew_not_offered`, since acting on it would execute a crew this server never
    loaded. With `crew_version` the fork runs on that version of the crew instead (see `ForkRequest`).

    Args:
        id (UUID):
        body (ForkRequest):  Example: {'from_step': 1, 'by': 'ops@example.com', 'reason': 'try the
            new writer prompt'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | RunView
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient | Client,
    body: ForkRequest,
) -> Response[ErrorResponse | RunView]:
    """Fork a run

     Creates a new queued run of the same crew that copies the source run's checkpoints `0..from_step`
    verbatim, records `parent_run_id` and `parent_step_idx`, and executes from step `from_step` (the
    server's runner picks it up). The source run is not touched. `input` gives the fork a new run input,
    but only with `from_step = 0`: every copied output was computed from the old input. A refused fork
    is 409 `fork_refused`, never 422, even when the body alone shows it (a new input with `from_step >
    0`): whether a fork can be made is decided by the store against the source run's state in one
    transaction (how far it has got, how many steps its crew has), so every refusal is one code, and the
    message says why. Only runs of crews this server offers (`GET /v1/crews`, matched by fingerprint)
    unless the server allows foreign runs: a run stored by the CLI or another server on a shared
    database is 404 `crew_not_offered`, since acting on it would execute a crew this server never
    loaded. With `crew_version` the fork runs on that version of the crew instead (see `ForkRequest`).

    Args:
        id (UUID):
        body (ForkRequest):  Example: {'from_step': 1, 'by': 'ops@example.com', 'reason': 'try the
            new writer prompt'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | RunView]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: UUID,
    *,
    client: AuthenticatedClient | Client,
    body: ForkRequest,
) -> ErrorResponse | RunView | None:
    """Fork a run

     Creates a new queued run of the same crew that copies the source run's checkpoints `0..from_step`
    verbatim, records `parent_run_id` and `parent_step_idx`, and executes from step `from_step` (the
    server's runner picks it up). The source run is not touched. `input` gives the fork a new run input,
    but only with `from_step = 0`: every copied output was computed from the old input. A refused fork
    is 409 `fork_refused`, never 422, even when the body alone shows it (a new input with `from_step >
    0`): whether a fork can be made is decided by the store against the source run's state in one
    transaction (how far it has got, how many steps its crew has), so every refusal is one code, and the
    message says why. Only runs of crews this server offers (`GET /v1/crews`, matched by fingerprint)
    unless the server allows foreign runs: a run stored by the CLI or another server on a shared
    database is 404 `crew_not_offered`, since acting on it would execute a crew this server never
    loaded. With `crew_version` the fork runs on that version of the crew instead (see `ForkRequest`).

    Args:
        id (UUID):
        body (ForkRequest):  Example: {'from_step': 1, 'by': 'ops@example.com', 'reason': 'try the
            new writer prompt'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | RunView
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
