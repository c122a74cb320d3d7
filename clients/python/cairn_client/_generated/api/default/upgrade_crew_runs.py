from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.crew_upgrade_request import CrewUpgradeRequest
from ...models.error_response import ErrorResponse
from ...models.upgrade_verdict import UpgradeVerdict
from ...types import Response


def _get_kwargs(
    name: str,
    *,
    body: CrewUpgradeRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/crews/{name}/upgrade".format(
            name=quote(str(name), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | list[UpgradeVerdict] | None:
    if response.status_code == 200:
        response_200 = []
        _response_200 = response.json()
        for response_200_item_data in _response_200:
            response_200_item = UpgradeVerdict.from_dict(response_200_item_data)

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

    if response.status_code == 404:
        response_404 = ErrorResponse.from_dict(response.json())

        return response_404

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
) -> Response[ErrorResponse | list[UpgradeVerdict]]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    name: str,
    *,
    client: AuthenticatedClient | Client,
    body: CrewUpgradeRequest,
) -> Response[ErrorResponse | list[UpgradeVerdict]]:
    """Move runs to another crew version

     Moves every unfinished run of the crew (or only `run`) that can move to version `to`, at its step
    boundary, one `crew_upgraded` event each with `by` and `reason`: `cairn runs upgrade --json`. A run
    moves when `to` keeps the steps it has started (same roles, same kinds, in order); a running run is
    left (reported, not moved). `to` must be a version this server loaded. The answer lists every run
    judged, moved or not; a run that cannot move is not an error.

    Args:
        name (str):
        body (CrewUpgradeRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | list[UpgradeVerdict]]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient | Client,
    body: CrewUpgradeRequest,
) -> ErrorResponse | list[UpgradeVerdict] | None:
    """Move runs to another crew version

     Moves every unfinished run of the crew (or only `run`) that can move to version `to`, at its step
    boundary, one `crew_upgraded` event each with `by` and `reason`: `cairn runs upgrade --json`. A run
    moves when `to` keeps the steps it has started (same roles, same kinds, in order); a running run is
    left (reported, not moved). `to` must be a version this server loaded. The answer lists every run
    judged, moved or not; a run that cannot move is not an error.

    Args:
        name (str):
        body (CrewUpgradeRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | list[UpgradeVerdict]
    """

    return sync_detailed(
        name=name,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient | Client,
    body: CrewUpgradeRequest,
) -> Response[ErrorResponse | list[UpgradeVerdict]]:
    """Move runs to another crew version

     Moves every unfinished run of the crew (or only `run`) that can move to version `to`, at its step
    boundary, one `crew_upgraded` event each with `by` and `reason`: `cairn runs upgrade --json`. A run
    moves when `to` keeps the steps it has started (same roles, same kinds, in order); a running run is
    left (reported, not moved). `to` must be a version this server loaded. The answer lists every run
    judged, moved or not; a run that cannot move is not an error.

    Args:
        name (str):
        body (CrewUpgradeRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | list[UpgradeVerdict]]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient | Client,
    body: CrewUpgradeRequest,
) -> ErrorResponse | list[UpgradeVerdict] | None:
    """Move runs to another crew version

     Moves every unfinished run of the crew (or only `run`) that can move to version `to`, at its step
    boundary, one `crew_upgraded` event each with `by` and `reason`: `cairn runs upgrade --json`. A run
    moves when `to` keeps the steps it has started (same roles, same kinds, in order); a running run is
    left (reported, not moved). `to` must be a version this server loaded. The answer lists every run
    judged, moved or not; a run that cannot move is not an error.

    Args:
        name (str):
        body (CrewUpgradeRequest):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | list[UpgradeVerdict]
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            body=body,
        )
    ).parsed
