from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_response import ErrorResponse
from ...models.run_view import RunView
from ...models.submit_request import SubmitRequest
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: SubmitRequest,
    traceparent: str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(traceparent, Unset):
        headers["traceparent"] = traceparent

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/runs",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | RunView | None:
    if response.status_code == 200:
        response_200 = RunView.from_dict(response.json())

        return response_200

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
    *,
    client: AuthenticatedClient | Client,
    body: SubmitRequest,
    traceparent: str | Unset = UNSET,
) -> Response[ErrorResponse | RunView]:
    """Submit a run

     Records a queued run of a crew loaded on this server; the server's runner executes it. Submitting
    again with the same `idempotency_key` returns the existing run (200) instead of creating one; the
    same key with a different crew or input is refused (409).

    Args:
        traceparent (str | Unset):
        body (SubmitRequest):  Example: {'crew': 'research', 'input': {'topic': 'rust'},
            'idempotency_key': 'order-42'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | RunView]
    """

    kwargs = _get_kwargs(
        body=body,
        traceparent=traceparent,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    body: SubmitRequest,
    traceparent: str | Unset = UNSET,
) -> ErrorResponse | RunView | None:
    """Submit a run

     Records a queued run of a crew loaded on this server; the server's runner executes it. Submitting
    again with the same `idempotency_key` returns the existing run (200) instead of creating one; the
    same key with a different crew or input is refused (409).

    Args:
        traceparent (str | Unset):
        body (SubmitRequest):  Example: {'crew': 'research', 'input': {'topic': 'rust'},
            'idempotency_key': 'order-42'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | RunView
    """

    return sync_detailed(
        client=client,
        body=body,
        traceparent=traceparent,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: SubmitRequest,
    traceparent: str | Unset = UNSET,
) -> Response[ErrorResponse | RunView]:
    """Submit a run

     Records a queued run of a crew loaded on this server; the server's runner executes it. Submitting
    again with the same `idempotency_key` returns the existing run (200) instead of creating one; the
    same key with a different crew or input is refused (409).

    Args:
        traceparent (str | Unset):
        body (SubmitRequest):  Example: {'crew': 'research', 'input': {'topic': 'rust'},
            'idempotency_key': 'order-42'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | RunView]
    """

    kwargs = _get_kwargs(
        body=body,
        traceparent=traceparent,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: SubmitRequest,
    traceparent: str | Unset = UNSET,
) -> ErrorResponse | RunView | None:
    """Submit a run

     Records a queued run of a crew loaded on this server; the server's runner executes it. Submitting
    again with the same `idempotency_key` returns the existing run (200) instead of creating one; the
    same key with a different crew or input is refused (409).

    Args:
        traceparent (str | Unset):
        body (SubmitRequest):  Example: {'crew': 'research', 'input': {'topic': 'rust'},
            'idempotency_key': 'order-42'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | RunView
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            traceparent=traceparent,
        )
    ).parsed
