from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.compact_request import CompactRequest
from ...models.compacted import Compacted
from ...models.error_response import ErrorResponse
from ...types import Response


def _get_kwargs(
    *,
    body: CompactRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/compact",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Compacted | ErrorResponse | None:
    if response.status_code == 200:
        response_200 = Compacted.from_dict(response.json())

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
) -> Response[Compacted | ErrorResponse]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: CompactRequest,
) -> Response[Compacted | ErrorResponse]:
    """Remove old rows (retention)

     Runs one retention pass with the policy in the body, in small batches, and returns the rows removed
    by table. `cairn compact` with `--server`.

    Args:
        body (CompactRequest): A retention policy; at least one criterion. Nothing a queued,
            running, waiting or interrupted run needs is ever removed; a failed run only by
            `failed_older_than`. Example: {'finished_older_than': '30d', 'journals': True}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Compacted | ErrorResponse]
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
    body: CompactRequest,
) -> Compacted | ErrorResponse | None:
    """Remove old rows (retention)

     Runs one retention pass with the policy in the body, in small batches, and returns the rows removed
    by table. `cairn compact` with `--server`.

    Args:
        body (CompactRequest): A retention policy; at least one criterion. Nothing a queued,
            running, waiting or interrupted run needs is ever removed; a failed run only by
            `failed_older_than`. Example: {'finished_older_than': '30d', 'journals': True}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Compacted | ErrorResponse
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: CompactRequest,
) -> Response[Compacted | ErrorResponse]:
    """Remove old rows (retention)

     Runs one retention pass with the policy in the body, in small batches, and returns the rows removed
    by table. `cairn compact` with `--server`.

    Args:
        body (CompactRequest): A retention policy; at least one criterion. Nothing a queued,
            running, waiting or interrupted run needs is ever removed; a failed run only by
            `failed_older_than`. Example: {'finished_older_than': '30d', 'journals': True}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Compacted | ErrorResponse]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: CompactRequest,
) -> Compacted | ErrorResponse | None:
    """Remove old rows (retention)

     Runs one retention pass with the policy in the body, in small batches, and returns the rows removed
    by table. `cairn compact` with `--server`.

    Args:
        body (CompactRequest): A retention policy; at least one criterion. Nothing a queued,
            running, waiting or interrupted run needs is ever removed; a failed run only by
            `failed_older_than`. Example: {'finished_older_than': '30d', 'journals': True}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Compacted | ErrorResponse
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
