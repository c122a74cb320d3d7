from http import HTTPStatus
from typing import Any
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_response import ErrorResponse
from ...models.wait_list import WaitList
from ...models.wait_status import WaitStatus
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    run: UUID | Unset = UNSET,
    status: WaitStatus | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_run: str | Unset = UNSET
    if not isinstance(run, Unset):
        json_run = str(run)
    params["run"] = json_run

    json_status: str | Unset = UNSET
    if not isinstance(status, Unset):
        json_status = status.value

    params["status"] = json_status

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/waits",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | WaitList | None:
    if response.status_code == 200:
        response_200 = WaitList.from_dict(response.json())

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
) -> Response[ErrorResponse | WaitList]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    run: UUID | Unset = UNSET,
    status: WaitStatus | Unset = UNSET,
) -> Response[ErrorResponse | WaitList]:
    """List human waits

     Waits oldest first: reviews of a step's output, approvals before a step, and questions a step asked.
    Each entry is the object `cairn waits list --json` prints. An empty parameter means it was not
    given.

    Args:
        run (UUID | Unset):
        status (WaitStatus | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | WaitList]
    """

    kwargs = _get_kwargs(
        run=run,
        status=status,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    run: UUID | Unset = UNSET,
    status: WaitStatus | Unset = UNSET,
) -> ErrorResponse | WaitList | None:
    """List human waits

     Waits oldest first: reviews of a step's output, approvals before a step, and questions a step asked.
    Each entry is the object `cairn waits list --json` prints. An empty parameter means it was not
    given.

    Args:
        run (UUID | Unset):
        status (WaitStatus | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | WaitList
    """

    return sync_detailed(
        client=client,
        run=run,
        status=status,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    run: UUID | Unset = UNSET,
    status: WaitStatus | Unset = UNSET,
) -> Response[ErrorResponse | WaitList]:
    """List human waits

     Waits oldest first: reviews of a step's output, approvals before a step, and questions a step asked.
    Each entry is the object `cairn waits list --json` prints. An empty parameter means it was not
    given.

    Args:
        run (UUID | Unset):
        status (WaitStatus | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | WaitList]
    """

    kwargs = _get_kwargs(
        run=run,
        status=status,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    run: UUID | Unset = UNSET,
    status: WaitStatus | Unset = UNSET,
) -> ErrorResponse | WaitList | None:
    """List human waits

     Waits oldest first: reviews of a step's output, approvals before a step, and questions a step asked.
    Each entry is the object `cairn waits list --json` prints. An empty parameter means it was not
    given.

    Args:
        run (UUID | Unset):
        status (WaitStatus | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | WaitList
    """

    return (
        await asyncio_detailed(
            client=client,
            run=run,
            status=status,
        )
    ).parsed
