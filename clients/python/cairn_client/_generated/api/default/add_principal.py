from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_response import ErrorResponse
from ...models.principal_issued import PrincipalIssued
from ...models.principal_request import PrincipalRequest
from ...types import Response


def _get_kwargs(
    *,
    body: PrincipalRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/principals",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | PrincipalIssued | None:
    if response.status_code == 201:
        response_201 = PrincipalIssued.from_dict(response.json())

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
) -> Response[ErrorResponse | PrincipalIssued]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: PrincipalRequest,
) -> Response[ErrorResponse | PrincipalIssued]:
    """Add a principal

     Adds a named person or service with a role, groups and tenants, and issues its token, shown this
    once (only its SHA-256 is stored). Audited as `principal_added`. Admins only. `cairn principals add`
    with `--server`.

    Args:
        body (PrincipalRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | PrincipalIssued]
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
    body: PrincipalRequest,
) -> ErrorResponse | PrincipalIssued | None:
    """Add a principal

     Adds a named person or service with a role, groups and tenants, and issues its token, shown this
    once (only its SHA-256 is stored). Audited as `principal_added`. Admins only. `cairn principals add`
    with `--server`.

    Args:
        body (PrincipalRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | PrincipalIssued
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: PrincipalRequest,
) -> Response[ErrorResponse | PrincipalIssued]:
    """Add a principal

     Adds a named person or service with a role, groups and tenants, and issues its token, shown this
    once (only its SHA-256 is stored). Audited as `principal_added`. Admins only. `cairn principals add`
    with `--server`.

    Args:
        body (PrincipalRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | PrincipalIssued]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: PrincipalRequest,
) -> ErrorResponse | PrincipalIssued | None:
    """Add a principal

     Adds a named person or service with a role, groups and tenants, and issues its token, shown this
    once (only its SHA-256 is stored). Audited as `principal_added`. Admins only. `cairn principals add`
    with `--server`.

    Args:
        body (PrincipalRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | PrincipalIssued
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
