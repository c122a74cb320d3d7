from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_response import ErrorResponse
from ...models.journal_list import JournalList
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: UUID,
    *,
    step: int | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["step"] = step

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/runs/{id}/journal".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | JournalList | None:
    if response.status_code == 200:
        response_200 = JournalList.from_dict(response.json())

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

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorResponse | JournalList]:
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
    step: int | Unset = UNSET,
) -> Response[ErrorResponse | JournalList]:
    """Show the journal of a run's agent steps

     Every transcript item of the run's `llm` steps as it was journaled (the document `cairn runs journal
    --json` prints, wrapped): assistant text, tool calls (before the tool ran) and results, human
    answers, repairs and the end of each model response, every generation, by step and `seq`.

    Args:
        id (UUID):
        step (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | JournalList]
    """

    kwargs = _get_kwargs(
        id=id,
        step=step,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: UUID,
    *,
    client: AuthenticatedClient | Client,
    step: int | Unset = UNSET,
) -> ErrorResponse | JournalList | None:
    """Show the journal of a run's agent steps

     Every transcript item of the run's `llm` steps as it was journaled (the document `cairn runs journal
    --json` prints, wrapped): assistant text, tool calls (before the tool ran) and results, human
    answers, repairs and the end of each model response, every generation, by step and `seq`.

    Args:
        id (UUID):
        step (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | JournalList
    """

    return sync_detailed(
        id=id,
        client=client,
        step=step,
    ).parsed


async def asyncio_detailed(
    id: UUID,
    *,
    client: AuthenticatedClient | Client,
    step: int | Unset = UNSET,
) -> Response[ErrorResponse | JournalList]:
    """Show the journal of a run's agent steps

     Every transcript item of the run's `llm` steps as it was journaled (the document `cairn runs journal
    --json` prints, wrapped): assistant text, tool calls (before the tool ran) and results, human
    answers, repairs and the end of each model response, every generation, by step and `seq`.

    Args:
        id (UUID):
        step (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | JournalList]
    """

    kwargs = _get_kwargs(
        id=id,
        step=step,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: UUID,
    *,
    client: AuthenticatedClient | Client,
    step: int | Unset = UNSET,
) -> ErrorResponse | JournalList | None:
    """Show the journal of a run's agent steps

     Every transcript item of the run's `llm` steps as it was journaled (the document `cairn runs journal
    --json` prints, wrapped): assistant text, tool calls (before the tool ran) and results, human
    answers, repairs and the end of each model response, every generation, by step and `seq`.

    Args:
        id (UUID):
        step (int | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | JournalList
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            step=step,
        )
    ).parsed
