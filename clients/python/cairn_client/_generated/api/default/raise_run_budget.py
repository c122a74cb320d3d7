from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.budget_raise_request import BudgetRaiseRequest
from ...models.error_response import ErrorResponse
from ...models.run_view import RunView
from ...types import Response


def _get_kwargs(
    id: UUID,
    *,
    body: BudgetRaiseRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/runs/{id}/budget".format(
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
    if response.status_code == 200:
        response_200 = RunView.from_dict(response.json())

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
    body: BudgetRaiseRequest,
) -> Response[ErrorResponse | RunView]:
    """Raise a run's budget

     Adds `raise` to each limit of the run's budget (its own limits, or its crew's `[budget]` where it
    has none; a limit neither has is not added), recorded durably as a `budget_raised` event carrying
    `by`, `reason`, the raise and the budget that stands. Nothing executes: an `interrupted` run stays
    interrupted until `POST /v1/runs/{id}/continue`. A finished run (`succeeded`, `failed`, `cancelled`)
    is 409 `wrong_state`, and nothing is written. `cairn runs continue RUN --budget tokens=+N` with
    `--server` sends `POST /v1/runs/{id}/continue` with `raise` instead, so the raise and the continue
    are one transaction.

    Args:
        id (UUID):
        body (BudgetRaiseRequest):

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
    body: BudgetRaiseRequest,
) -> ErrorResponse | RunView | None:
    """Raise a run's budget

     Adds `raise` to each limit of the run's budget (its own limits, or its crew's `[budget]` where it
    has none; a limit neither has is not added), recorded durably as a `budget_raised` event carrying
    `by`, `reason`, the raise and the budget that stands. Nothing executes: an `interrupted` run stays
    interrupted until `POST /v1/runs/{id}/continue`. A finished run (`succeeded`, `failed`, `cancelled`)
    is 409 `wrong_state`, and nothing is written. `cairn runs continue RUN --budget tokens=+N` with
    `--server` sends `POST /v1/runs/{id}/continue` with `raise` instead, so the raise and the continue
    are one transaction.

    Args:
        id (UUID):
        body (BudgetRaiseRequest):

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
    body: BudgetRaiseRequest,
) -> Response[ErrorResponse | RunView]:
    """Raise a run's budget

     Adds `raise` to each limit of the run's budget (its own limits, or its crew's `[budget]` where it
    has none; a limit neither has is not added), recorded durably as a `budget_raised` event carrying
    `by`, `reason`, the raise and the budget that stands. Nothing executes: an `interrupted` run stays
    interrupted until `POST /v1/runs/{id}/continue`. A finished run (`succeeded`, `failed`, `cancelled`)
    is 409 `wrong_state`, and nothing is written. `cairn runs continue RUN --budget tokens=+N` with
    `--server` sends `POST /v1/runs/{id}/continue` with `raise` instead, so the raise and the continue
    are one transaction.

    Args:
        id (UUID):
        body (BudgetRaiseRequest):

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
    body: BudgetRaiseRequest,
) -> ErrorResponse | RunView | None:
    """Raise a run's budget

     Adds `raise` to each limit of the run's budget (its own limits, or its crew's `[budget]` where it
    has none; a limit neither has is not added), recorded durably as a `budget_raised` event carrying
    `by`, `reason`, the raise and the budget that stands. Nothing executes: an `interrupted` run stays
    interrupted until `POST /v1/runs/{id}/continue`. A finished run (`succeeded`, `failed`, `cancelled`)
    is 409 `wrong_state`, and nothing is written. `cairn runs continue RUN --budget tokens=+N` with
    `--server` sends `POST /v1/runs/{id}/continue` with `raise` instead, so the raise and the continue
    are one transaction.

    Args:
        id (UUID):
        body (BudgetRaiseRequest):

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
