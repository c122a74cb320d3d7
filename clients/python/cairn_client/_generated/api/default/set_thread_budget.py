from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_response import ErrorResponse
from ...models.thread_budget import ThreadBudget
from ...models.thread_budget_request import ThreadBudgetRequest
from ...types import Response


def _get_kwargs(
    id: str,
    *,
    body: ThreadBudgetRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/threads/{id}/budget".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | ThreadBudget | None:
    if response.status_code == 200:
        response_200 = ThreadBudget.from_dict(response.json())

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

    if response.status_code == 408:
        response_408 = ErrorResponse.from_dict(response.json())

        return response_408

    if response.status_code == 413:
        response_413 = ErrorResponse.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorResponse.from_dict(response.json())

        return response_415

    if response.status_code == 422:
        response_422 = ErrorResponse.from_dict(response.json())

        return response_422

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
) -> Response[ErrorResponse | ThreadBudget]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: ThreadBudgetRequest,
) -> Response[ErrorResponse | ThreadBudget]:
    """Set or raise a thread's budget

     `set` replaces the thread's limits it names (the others stay); `raise` adds to each named limit the
    thread has. The thread need not have a run yet: a budget set before its first run applies from that
    run on. Checked before each model call of a run of the thread, over what every run of the thread and
    their children spent: a call with no room stops its run `interrupted` (`budget_exceeded`), which
    `POST /v1/runs/{id}/continue` carries on after a raise. `cairn threads budget THREAD --budget
    tokens=N` with `--server` sends this.

    Args:
        id (str):
        body (ThreadBudgetRequest): Exactly one of `set` and `raise` (400 `bad_body` otherwise).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | ThreadBudget]
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
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: ThreadBudgetRequest,
) -> ErrorResponse | ThreadBudget | None:
    """Set or raise a thread's budget

     `set` replaces the thread's limits it names (the others stay); `raise` adds to each named limit the
    thread has. The thread need not have a run yet: a budget set before its first run applies from that
    run on. Checked before each model call of a run of the thread, over what every run of the thread and
    their children spent: a call with no room stops its run `interrupted` (`budget_exceeded`), which
    `POST /v1/runs/{id}/continue` carries on after a raise. `cairn threads budget THREAD --budget
    tokens=N` with `--server` sends this.

    Args:
        id (str):
        body (ThreadBudgetRequest): Exactly one of `set` and `raise` (400 `bad_body` otherwise).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | ThreadBudget
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: ThreadBudgetRequest,
) -> Response[ErrorResponse | ThreadBudget]:
    """Set or raise a thread's budget

     `set` replaces the thread's limits it names (the others stay); `raise` adds to each named limit the
    thread has. The thread need not have a run yet: a budget set before its first run applies from that
    run on. Checked before each model call of a run of the thread, over what every run of the thread and
    their children spent: a call with no room stops its run `interrupted` (`budget_exceeded`), which
    `POST /v1/runs/{id}/continue` carries on after a raise. `cairn threads budget THREAD --budget
    tokens=N` with `--server` sends this.

    Args:
        id (str):
        body (ThreadBudgetRequest): Exactly one of `set` and `raise` (400 `bad_body` otherwise).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | ThreadBudget]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: ThreadBudgetRequest,
) -> ErrorResponse | ThreadBudget | None:
    """Set or raise a thread's budget

     `set` replaces the thread's limits it names (the others stay); `raise` adds to each named limit the
    thread has. The thread need not have a run yet: a budget set before its first run applies from that
    run on. Checked before each model call of a run of the thread, over what every run of the thread and
    their children spent: a call with no room stops its run `interrupted` (`budget_exceeded`), which
    `POST /v1/runs/{id}/continue` carries on after a raise. `cairn threads budget THREAD --budget
    tokens=N` with `--server` sends this.

    Args:
        id (str):
        body (ThreadBudgetRequest): Exactly one of `set` and `raise` (400 `bad_body` otherwise).

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | ThreadBudget
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
