from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.continue_request import ContinueRequest
from ...models.error_response import ErrorResponse
from ...models.run_view import RunView
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: UUID,
    *,
    body: ContinueRequest | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/runs/{id}/continue".format(
            id=quote(str(id), safe=""),
        ),
    }

    if not isinstance(body, Unset):
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
    body: ContinueRequest | Unset = UNSET,
) -> Response[ErrorResponse | RunView]:
    """Continue an interrupted run

     `interrupted → queued`: the interrupted step carries on (same attempt). The action is recorded
    durably as an event carrying `by` and `reason`, and answered at once with the run: nothing executes
    in the request (a queued run is picked up by the server's runner, woken right away). The body is
    optional: no body, an empty body and `{}` are the same. Only runs of crews this server offers (`GET
    /v1/crews`, matched by fingerprint) unless the server allows foreign runs: a run stored by the CLI
    or another server on a shared database is 404 `crew_not_offered`, since acting on it would execute a
    crew this server never loaded. With `raise`, the run's budget is raised first (as `POST
    /v1/runs/{id}/budget` does) in the same transaction as the continue: a continue that is refused
    writes no raise. With `raise`, a `queued` or `running` run only takes the raise (a running holder
    reads it before its next model call), as does a run waiting for a person (its answer carries it on),
    and a waiting parent's interrupted children are continued; a failed, cancelled or succeeded run is
    409 `wrong_state` and nothing is written.

    Args:
        id (UUID):
        body (ContinueRequest | Unset): Who acts and why, recorded on the action's event, and a
            raise of the run's budget made in the same transaction. Optional, as is every field.
            Example: {'by': 'ops@example.com', 'reason': 'the tree needs more room', 'raise':
            {'tokens': 4000}}.

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
    body: ContinueRequest | Unset = UNSET,
) -> ErrorResponse | RunView | None:
    """Continue an interrupted run

     `interrupted → queued`: the interrupted step carries on (same attempt). The action is recorded
    durably as an event carrying `by` and `reason`, and answered at once with the run: nothing executes
    in the request (a queued run is picked up by the server's runner, woken right away). The body is
    optional: no body, an empty body and `{}` are the same. Only runs of crews this server offers (`GET
    /v1/crews`, matched by fingerprint) unless the server allows foreign runs: a run stored by the CLI
    or another server on a shared database is 404 `crew_not_offered`, since acting on it would execute a
    crew this server never loaded. With `raise`, the run's budget is raised first (as `POST
    /v1/runs/{id}/budget` does) in the same transaction as the continue: a continue that is refused
    writes no raise. With `raise`, a `queued` or `running` run only takes the raise (a running holder
    reads it before its next model call), as does a run waiting for a person (its answer carries it on),
    and a waiting parent's interrupted children are continued; a failed, cancelled or succeeded run is
    409 `wrong_state` and nothing is written.

    Args:
        id (UUID):
        body (ContinueRequest | Unset): Who acts and why, recorded on the action's event, and a
            raise of the run's budget made in the same transaction. Optional, as is every field.
            Example: {'by': 'ops@example.com', 'reason': 'the tree needs more room', 'raise':
            {'tokens': 4000}}.

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
    body: ContinueRequest | Unset = UNSET,
) -> Response[ErrorResponse | RunView]:
    """Continue an interrupted run

     `interrupted → queued`: the interrupted step carries on (same attempt). The action is recorded
    durably as an event carrying `by` and `reason`, and answered at once with the run: nothing executes
    in the request (a queued run is picked up by the server's runner, woken right away). The body is
    optional: no body, an empty body and `{}` are the same. Only runs of crews this server offers (`GET
    /v1/crews`, matched by fingerprint) unless the server allows foreign runs: a run stored by the CLI
    or another server on a shared database is 404 `crew_not_offered`, since acting on it would execute a
    crew this server never loaded. With `raise`, the run's budget is raised first (as `POST
    /v1/runs/{id}/budget` does) in the same transaction as the continue: a continue that is refused
    writes no raise. With `raise`, a `queued` or `running` run only takes the raise (a running holder
    reads it before its next model call), as does a run waiting for a person (its answer carries it on),
    and a waiting parent's interrupted children are continued; a failed, cancelled or succeeded run is
    409 `wrong_state` and nothing is written.

    Args:
        id (UUID):
        body (ContinueRequest | Unset): Who acts and why, recorded on the action's event, and a
            raise of the run's budget made in the same transaction. Optional, as is every field.
            Example: {'by': 'ops@example.com', 'reason': 'the tree needs more room', 'raise':
            {'tokens': 4000}}.

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
    body: ContinueRequest | Unset = UNSET,
) -> ErrorResponse | RunView | None:
    """Continue an interrupted run

     `interrupted → queued`: the interrupted step carries on (same attempt). The action is recorded
    durably as an event carrying `by` and `reason`, and answered at once with the run: nothing executes
    in the request (a queued run is picked up by the server's runner, woken right away). The body is
    optional: no body, an empty body and `{}` are the same. Only runs of crews this server offers (`GET
    /v1/crews`, matched by fingerprint) unless the server allows foreign runs: a run stored by the CLI
    or another server on a shared database is 404 `crew_not_offered`, since acting on it would execute a
    crew this server never loaded. With `raise`, the run's budget is raised first (as `POST
    /v1/runs/{id}/budget` does) in the same transaction as the continue: a continue that is refused
    writes no raise. With `raise`, a `queued` or `running` run only takes the raise (a running holder
    reads it before its next model call), as does a run waiting for a person (its answer carries it on),
    and a waiting parent's interrupted children are continued; a failed, cancelled or succeeded run is
    409 `wrong_state` and nothing is written.

    Args:
        id (UUID):
        body (ContinueRequest | Unset): Who acts and why, recorded on the action's event, and a
            raise of the run's budget made in the same transaction. Optional, as is every field.
            Example: {'by': 'ops@example.com', 'reason': 'the tree needs more room', 'raise':
            {'tokens': 4000}}.

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
