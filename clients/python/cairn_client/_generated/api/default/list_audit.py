import datetime
from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.audit_entry import AuditEntry
from ...models.error_response import ErrorResponse
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    principal: str | Unset = UNSET,
    since: datetime.datetime | Unset = UNSET,
    after: int | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["principal"] = principal

    json_since: str | Unset = UNSET
    if not isinstance(since, Unset):
        json_since = since.isoformat()
    params["since"] = json_since

    params["after"] = after

    params["limit"] = limit

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/audit",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | list[AuditEntry] | None:
    if response.status_code == 200:
        response_200 = []
        _response_200 = response.json()
        for response_200_item_data in _response_200:
            response_200_item = AuditEntry.from_dict(response_200_item_data)

            response_200.append(response_200_item)

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
) -> Response[ErrorResponse | list[AuditEntry]]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    principal: str | Unset = UNSET,
    since: datetime.datetime | Unset = UNSET,
    after: int | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> Response[ErrorResponse | list[AuditEntry]]:
    """List the audit

     Every decision, refusal and change a principal made, oldest first: operator actions, submits and
    answers with the channel they came through, and principal changes. Admins only. `cairn audit` with
    `--server`.

    Args:
        principal (str | Unset):
        since (datetime.datetime | Unset):
        after (int | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | list[AuditEntry]]
    """

    kwargs = _get_kwargs(
        principal=principal,
        since=since,
        after=after,
        limit=limit,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    principal: str | Unset = UNSET,
    since: datetime.datetime | Unset = UNSET,
    after: int | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> ErrorResponse | list[AuditEntry] | None:
    """List the audit

     Every decision, refusal and change a principal made, oldest first: operator actions, submits and
    answers with the channel they came through, and principal changes. Admins only. `cairn audit` with
    `--server`.

    Args:
        principal (str | Unset):
        since (datetime.datetime | Unset):
        after (int | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | list[AuditEntry]
    """

    return sync_detailed(
        client=client,
        principal=principal,
        since=since,
        after=after,
        limit=limit,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    principal: str | Unset = UNSET,
    since: datetime.datetime | Unset = UNSET,
    after: int | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> Response[ErrorResponse | list[AuditEntry]]:
    """List the audit

     Every decision, refusal and change a principal made, oldest first: operator actions, submits and
    answers with the channel they came through, and principal changes. Admins only. `cairn audit` with
    `--server`.

    Args:
        principal (str | Unset):
        since (datetime.datetime | Unset):
        after (int | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | list[AuditEntry]]
    """

    kwargs = _get_kwargs(
        principal=principal,
        since=since,
        after=after,
        limit=limit,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    principal: str | Unset = UNSET,
    since: datetime.datetime | Unset = UNSET,
    after: int | Unset = UNSET,
    limit: int | Unset = UNSET,
) -> ErrorResponse | list[AuditEntry] | None:
    """List the audit

     Every decision, refusal and change a principal made, oldest first: operator actions, submits and
    answers with the channel they came through, and principal changes. Admins only. `cairn audit` with
    `--server`.

    Args:
        principal (str | Unset):
        since (datetime.datetime | Unset):
        after (int | Unset):
        limit (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | list[AuditEntry]
    """

    return (
        await asyncio_detailed(
            client=client,
            principal=principal,
            since=since,
            after=after,
            limit=limit,
        )
    ).parsed
