from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.create_schedule_request import CreateScheduleRequest
from ...models.error_response import ErrorResponse
from ...models.schedule_view import ScheduleView
from ...types import Response


def _get_kwargs(
    *,
    body: CreateScheduleRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/schedules",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | ScheduleView | None:
    if response.status_code == 200:
        response_200 = ScheduleView.from_dict(response.json())

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
) -> Response[ErrorResponse | ScheduleView]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: CreateScheduleRequest,
) -> Response[ErrorResponse | ScheduleView]:
    """Create a schedule

     Stores a schedule of a crew the server loaded; its first slot is the first after now. Every server
    and worker of the database fires due schedules at each poll; each slot's run is submitted once (key
    `schedule:NAME:SLOT`) in the transaction that moves the next slot forward.

    Args:
        body (CreateScheduleRequest): Exactly one of `every` and `cron`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | ScheduleView]
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
    body: CreateScheduleRequest,
) -> ErrorResponse | ScheduleView | None:
    """Create a schedule

     Stores a schedule of a crew the server loaded; its first slot is the first after now. Every server
    and worker of the database fires due schedules at each poll; each slot's run is submitted once (key
    `schedule:NAME:SLOT`) in the transaction that moves the next slot forward.

    Args:
        body (CreateScheduleRequest): Exactly one of `every` and `cron`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | ScheduleView
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: CreateScheduleRequest,
) -> Response[ErrorResponse | ScheduleView]:
    """Create a schedule

     Stores a schedule of a crew the server loaded; its first slot is the first after now. Every server
    and worker of the database fires due schedules at each poll; each slot's run is submitted once (key
    `schedule:NAME:SLOT`) in the transaction that moves the next slot forward.

    Args:
        body (CreateScheduleRequest): Exactly one of `every` and `cron`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | ScheduleView]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: CreateScheduleRequest,
) -> ErrorResponse | ScheduleView | None:
    """Create a schedule

     Stores a schedule of a crew the server loaded; its first slot is the first after now. Every server
    and worker of the database fires due schedules at each poll; each slot's run is submitted once (key
    `schedule:NAME:SLOT`) in the transaction that moves the next slot forward.

    Args:
        body (CreateScheduleRequest): Exactly one of `every` and `cron`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | ScheduleView
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
