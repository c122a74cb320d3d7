from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_response import ErrorResponse
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/metrics",
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | str | None:
    if response.status_code == 200:
        response_200 = response.text
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

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorResponse | str]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
) -> Response[ErrorResponse | str]:
    """Prometheus metrics

     Prometheus text format 0.0.4. From the store, per scrape: `cairn_runs{status}` (runs by status),
    `cairn_queue_ready` (queued runs whose back-off has passed) and `cairn_store_up`. In-process, since
    this server started: `cairn_http_requests_total{route,code}`, `cairn_runner_in_flight`,
    `cairn_runner_drives_total{outcome}`, `cairn_step_attempts_total`,
    `cairn_step_tokens_total{direction}` and the histogram `cairn_step_duration_seconds`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | str]
    """

    kwargs = _get_kwargs()

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
) -> ErrorResponse | str | None:
    """Prometheus metrics

     Prometheus text format 0.0.4. From the store, per scrape: `cairn_runs{status}` (runs by status),
    `cairn_queue_ready` (queued runs whose back-off has passed) and `cairn_store_up`. In-process, since
    this server started: `cairn_http_requests_total{route,code}`, `cairn_runner_in_flight`,
    `cairn_runner_drives_total{outcome}`, `cairn_step_attempts_total`,
    `cairn_step_tokens_total{direction}` and the histogram `cairn_step_duration_seconds`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | str
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
) -> Response[ErrorResponse | str]:
    """Prometheus metrics

     Prometheus text format 0.0.4. From the store, per scrape: `cairn_runs{status}` (runs by status),
    `cairn_queue_ready` (queued runs whose back-off has passed) and `cairn_store_up`. In-process, since
    this server started: `cairn_http_requests_total{route,code}`, `cairn_runner_in_flight`,
    `cairn_runner_drives_total{outcome}`, `cairn_step_attempts_total`,
    `cairn_step_tokens_total{direction}` and the histogram `cairn_step_duration_seconds`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | str]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
) -> ErrorResponse | str | None:
    """Prometheus metrics

     Prometheus text format 0.0.4. From the store, per scrape: `cairn_runs{status}` (runs by status),
    `cairn_queue_ready` (queued runs whose back-off has passed) and `cairn_store_up`. In-process, since
    this server started: `cairn_http_requests_total{route,code}`, `cairn_runner_in_flight`,
    `cairn_runner_drives_total{outcome}`, `cairn_step_attempts_total`,
    `cairn_step_tokens_total{direction}` and the histogram `cairn_step_duration_seconds`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | str
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
