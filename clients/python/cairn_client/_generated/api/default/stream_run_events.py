from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_response import ErrorResponse
from ...models.stream_run_events_response_200 import StreamRunEventsResponse200
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: UUID,
    *,
    follow: bool | Unset = True,
    last_event_id: int | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(last_event_id, Unset):
        headers["Last-Event-ID"] = str(last_event_id)

    params: dict[str, Any] = {}

    params["follow"] = follow

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/runs/{id}/events".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | StreamRunEventsResponse200 | None:
    if response.status_code == 200:
        response_200 = StreamRunEventsResponse200.from_dict(response.text)

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

    if response.status_code == 429:
        response_429 = ErrorResponse.from_dict(response.json())

        return response_429

    if response.status_code == 500:
        response_500 = ErrorResponse.from_dict(response.json())

        return response_500

    if response.status_code == 503:
        response_503 = ErrorResponse.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorResponse | StreamRunEventsResponse200]:
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
    follow: bool | Unset = True,
    last_event_id: int | Unset = UNSET,
) -> Response[ErrorResponse | StreamRunEventsResponse200]:
    """Follow a run's events

     Server-Sent Events: every event of the run in order, then new ones as they are written. Each SSE
    event has `id` = the event's per-run `seq` (from 1), `event` = its `kind`, and `data` = the JSON of
    the `Event` schema. Reconnecting with `Last-Event-ID: N` resumes with exactly the events whose `seq`
    is greater than N. The stream ends once the run is `succeeded`, `failed` or `cancelled` and all its
    events were sent (a `waiting` or `interrupted` run keeps it open). Comments (`:`) are sent as keep-
    alives. Each open stream polls the database, so the server caps how many are open at once. Between
    them come `output_delta` events, an `llm` step's text as the model streams it: no `id`, `event` =
    `output_delta`, and `data` = `{"kind": "output_delta", "run_id", "idx", "attempt", "after_seq",
    "text"}`. They are never stored, so a reconnect does not replay them; the whole block arrives as a
    journal item (`GET /v1/runs/{id}/journal`) with a `seq` greater than `after_seq`. A client that
    shows the journal up to `seq` M shows only pieces with `after_seq` >= M, so no text appears twice.
    Pieces of a step run by another process arrive on PostgreSQL (notifications); on SQLite only from
    the server's own runner.

    Args:
        id (UUID):
        follow (bool | Unset):  Default: True.
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | StreamRunEventsResponse200]
    """

    kwargs = _get_kwargs(
        id=id,
        follow=follow,
        last_event_id=last_event_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: UUID,
    *,
    client: AuthenticatedClient | Client,
    follow: bool | Unset = True,
    last_event_id: int | Unset = UNSET,
) -> ErrorResponse | StreamRunEventsResponse200 | None:
    """Follow a run's events

     Server-Sent Events: every event of the run in order, then new ones as they are written. Each SSE
    event has `id` = the event's per-run `seq` (from 1), `event` = its `kind`, and `data` = the JSON of
    the `Event` schema. Reconnecting with `Last-Event-ID: N` resumes with exactly the events whose `seq`
    is greater than N. The stream ends once the run is `succeeded`, `failed` or `cancelled` and all its
    events were sent (a `waiting` or `interrupted` run keeps it open). Comments (`:`) are sent as keep-
    alives. Each open stream polls the database, so the server caps how many are open at once. Between
    them come `output_delta` events, an `llm` step's text as the model streams it: no `id`, `event` =
    `output_delta`, and `data` = `{"kind": "output_delta", "run_id", "idx", "attempt", "after_seq",
    "text"}`. They are never stored, so a reconnect does not replay them; the whole block arrives as a
    journal item (`GET /v1/runs/{id}/journal`) with a `seq` greater than `after_seq`. A client that
    shows the journal up to `seq` M shows only pieces with `after_seq` >= M, so no text appears twice.
    Pieces of a step run by another process arrive on PostgreSQL (notifications); on SQLite only from
    the server's own runner.

    Args:
        id (UUID):
        follow (bool | Unset):  Default: True.
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | StreamRunEventsResponse200
    """

    return sync_detailed(
        id=id,
        client=client,
        follow=follow,
        last_event_id=last_event_id,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient | Client,
    follow: bool | Unset = True,
    last_event_id: int | Unset = UNSET,
) -> Response[ErrorResponse | StreamRunEventsResponse200]:
    """Follow a run's events

     Server-Sent Events: every event of the run in order, then new ones as they are written. Each SSE
    event has `id` = the event's per-run `seq` (from 1), `event` = its `kind`, and `data` = the JSON of
    the `Event` schema. Reconnecting with `Last-Event-ID: N` resumes with exactly the events whose `seq`
    is greater than N. The stream ends once the run is `succeeded`, `failed` or `cancelled` and all its
    events were sent (a `waiting` or `interrupted` run keeps it open). Comments (`:`) are sent as keep-
    alives. Each open stream polls the database, so the server caps how many are open at once. Between
    them come `output_delta` events, an `llm` step's text as the model streams it: no `id`, `event` =
    `output_delta`, and `data` = `{"kind": "output_delta", "run_id", "idx", "attempt", "after_seq",
    "text"}`. They are never stored, so a reconnect does not replay them; the whole block arrives as a
    journal item (`GET /v1/runs/{id}/journal`) with a `seq` greater than `after_seq`. A client that
    shows the journal up to `seq` M shows only pieces with `after_seq` >= M, so no text appears twice.
    Pieces of a step run by another process arrive on PostgreSQL (notifications); on SQLite only from
    the server's own runner.

    Args:
        id (UUID):
        follow (bool | Unset):  Default: True.
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | StreamRunEventsResponse200]
    """

    kwargs = _get_kwargs(
        id=id,
        follow=follow,
        last_event_id=last_event_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: UUID,
    *,
    client: AuthenticatedClient | Client,
    follow: bool | Unset = True,
    last_event_id: int | Unset = UNSET,
) -> ErrorResponse | StreamRunEventsResponse200 | None:
    """Follow a run's events

     Server-Sent Events: every event of the run in order, then new ones as they are written. Each SSE
    event has `id` = the event's per-run `seq` (from 1), `event` = its `kind`, and `data` = the JSON of
    the `Event` schema. Reconnecting with `Last-Event-ID: N` resumes with exactly the events whose `seq`
    is greater than N. The stream ends once the run is `succeeded`, `failed` or `cancelled` and all its
    events were sent (a `waiting` or `interrupted` run keeps it open). Comments (`:`) are sent as keep-
    alives. Each open stream polls the database, so the server caps how many are open at once. Between
    them come `output_delta` events, an `llm` step's text as the model streams it: no `id`, `event` =
    `output_delta`, and `data` = `{"kind": "output_delta", "run_id", "idx", "attempt", "after_seq",
    "text"}`. They are never stored, so a reconnect does not replay them; the whole block arrives as a
    journal item (`GET /v1/runs/{id}/journal`) with a `seq` greater than `after_seq`. A client that
    shows the journal up to `seq` M shows only pieces with `after_seq` >= M, so no text appears twice.
    Pieces of a step run by another process arrive on PostgreSQL (notifications); on SQLite only from
    the server's own runner.

    Args:
        id (UUID):
        follow (bool | Unset):  Default: True.
        last_event_id (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | StreamRunEventsResponse200
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            follow=follow,
            last_event_id=last_event_id,
        )
    ).parsed
