from http import HTTPStatus
from typing import Any
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_response import ErrorResponse
from ...models.list_runs_order import ListRunsOrder
from ...models.run_page import RunPage
from ...models.run_status import RunStatus
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    status: RunStatus | Unset = UNSET,
    crew: str | Unset = UNSET,
    tenant: str | Unset = UNSET,
    limit: int | Unset = 100,
    cursor: UUID | Unset = UNSET,
    order: ListRunsOrder | Unset = UNSET,
    parent: UUID | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_status: str | Unset = UNSET
    if not isinstance(status, Unset):
        json_status = status.value

    params["status"] = json_status

    params["crew"] = crew

    params["tenant"] = tenant

    params["limit"] = limit

    json_cursor: str | Unset = UNSET
    if not isinstance(cursor, Unset):
        json_cursor = str(cursor)
    params["cursor"] = json_cursor

    json_order: str | Unset = UNSET
    if not isinstance(order, Unset):
        json_order = order.value

    params["order"] = json_order

    json_parent: str | Unset = UNSET
    if not isinstance(parent, Unset):
        json_parent = str(parent)
    params["parent"] = json_parent

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/runs",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | RunPage | None:
    if response.status_code == 200:
        response_200 = RunPage.from_dict(response.json())

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
) -> Response[ErrorResponse | RunPage]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    status: RunStatus | Unset = UNSET,
    crew: str | Unset = UNSET,
    tenant: str | Unset = UNSET,
    limit: int | Unset = 100,
    cursor: UUID | Unset = UNSET,
    order: ListRunsOrder | Unset = UNSET,
    parent: UUID | Unset = UNSET,
) -> Response[ErrorResponse | RunPage]:
    """List runs

     Runs oldest first (by creation time, then id; `order=newest` for newest first), without their steps.
    Pass `next_cursor` back as `cursor` for the next page; runs that change status between pages are
    neither repeated nor skipped.

    Args:
        status (RunStatus | Unset):
        crew (str | Unset):
        tenant (str | Unset):
        limit (int | Unset):  Default: 100.
        cursor (UUID | Unset):
        order (ListRunsOrder | Unset):
        parent (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | RunPage]
    """

    kwargs = _get_kwargs(
        status=status,
        crew=crew,
        tenant=tenant,
        limit=limit,
        cursor=cursor,
        order=order,
        parent=parent,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    status: RunStatus | Unset = UNSET,
    crew: str | Unset = UNSET,
    tenant: str | Unset = UNSET,
    limit: int | Unset = 100,
    cursor: UUID | Unset = UNSET,
    order: ListRunsOrder | Unset = UNSET,
    parent: UUID | Unset = UNSET,
) -> ErrorResponse | RunPage | None:
    """List runs

     Runs oldest first (by creation time, then id; `order=newest` for newest first), without their steps.
    Pass `next_cursor` back as `cursor` for the next page; runs that change status between pages are
    neither repeated nor skipped.

    Args:
        status (RunStatus | Unset):
        crew (str | Unset):
        tenant (str | Unset):
        limit (int | Unset):  Default: 100.
        cursor (UUID | Unset):
        order (ListRunsOrder | Unset):
        parent (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | RunPage
    """

    return sync_detailed(
        client=client,
        status=status,
        crew=crew,
        tenant=tenant,
        limit=limit,
        cursor=cursor,
        order=order,
        parent=parent,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    status: RunStatus | Unset = UNSET,
    crew: str | Unset = UNSET,
    tenant: str | Unset = UNSET,
    limit: int | Unset = 100,
    cursor: UUID | Unset = UNSET,
    order: ListRunsOrder | Unset = UNSET,
    parent: UUID | Unset = UNSET,
) -> Response[ErrorResponse | RunPage]:
    """List runs

     Runs oldest first (by creation time, then id; `order=newest` for newest first), without their steps.
    Pass `next_cursor` back as `cursor` for the next page; runs that change status between pages are
    neither repeated nor skipped.

    Args:
        status (RunStatus | Unset):
        crew (str | Unset):
        tenant (str | Unset):
        limit (int | Unset):  Default: 100.
        cursor (UUID | Unset):
        order (ListRunsOrder | Unset):
        parent (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | RunPage]
    """

    kwargs = _get_kwargs(
        status=status,
        crew=crew,
        tenant=tenant,
        limit=limit,
        cursor=cursor,
        order=order,
        parent=parent,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    status: RunStatus | Unset = UNSET,
    crew: str | Unset = UNSET,
    tenant: str | Unset = UNSET,
    limit: int | Unset = 100,
    cursor: UUID | Unset = UNSET,
    order: ListRunsOrder | Unset = UNSET,
    parent: UUID | Unset = UNSET,
) -> ErrorResponse | RunPage | None:
    """List runs

     Runs oldest first (by creation time, then id; `order=newest` for newest first), without their steps.
    Pass `next_cursor` back as `cursor` for the next page; runs that change status between pages are
    neither repeated nor skipped.

    Args:
        status (RunStatus | Unset):
        crew (str | Unset):
        tenant (str | Unset):
        limit (int | Unset):  Default: 100.
        cursor (UUID | Unset):
        order (ListRunsOrder | Unset):
        parent (UUID | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | RunPage
    """

    return (
        await asyncio_detailed(
            client=client,
            status=status,
            crew=crew,
            tenant=tenant,
            limit=limit,
            cursor=cursor,
            order=order,
            parent=parent,
        )
    ).parsed
