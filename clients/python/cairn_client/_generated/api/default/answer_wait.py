from http import HTTPStatus
from typing import Any
from urllib.parse import quote
from uuid import UUID

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.answer_approve_request import AnswerApproveRequest
from ...models.answer_edit_request import AnswerEditRequest
from ...models.answer_reject_request import AnswerRejectRequest
from ...models.answer_value_request import AnswerValueRequest
from ...models.answered import Answered
from ...models.error_response import ErrorResponse
from ...types import Response


def _get_kwargs(
    id: UUID,
    *,
    body: AnswerApproveRequest
    | AnswerEditRequest
    | AnswerRejectRequest
    | AnswerValueRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/waits/{id}/answer".format(
            id=quote(str(id), safe=""),
        ),
    }

    if (
        isinstance(body, AnswerApproveRequest)
        or isinstance(body, AnswerEditRequest)
        or isinstance(body, AnswerRejectRequest)
    ):
        _kwargs["json"] = body.to_dict()
    else:
        _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Answered | ErrorResponse | None:
    if response.status_code == 200:
        response_200 = Answered.from_dict(response.json())

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

    if response.status_code == 422:
        response_422 = ErrorResponse.from_dict(response.json())

        return response_422

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
) -> Response[Answered | ErrorResponse]:
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
    body: AnswerApproveRequest
    | AnswerEditRequest
    | AnswerRejectRequest
    | AnswerValueRequest,
) -> Response[Answered | ErrorResponse]:
    """Answer a human wait

     Records a person's answer durably and returns the wait with its run (`run`: where the run stands
    right after the answer). What it does to the run is the engine's: a review's `approve` commits the
    step's output and `edit` commits the given `output` instead (the original is kept in the
    `wait_answered` event); a review's `reject` runs the step again (attempt + 1) with the `feedback` in
    its context, which opens a new review; an approval's `approve` lets the step run and its `reject`
    fails the run (error kind `rejected`); a question's `answer` runs the step again from its start with
    the value in its answers. The run is then usually `queued` and the server's runner, woken right
    away, carries it on; nothing executes in the request. The same answer again is a no-op (200, the
    wait unchanged, even if `by` differs); a different answer to a wait that is no longer open is 409.
    Wait deadlines are applied by the server's runner (every poll), as `cairn waits expire` does. On a
    wait whose agent has an approver policy the answer is the caller's vote: one per principal; the vote
    that meets the policy answers the wait, the others leave it open (see `GET /v1/waits/{id}/ballot`).

    Args:
        id (UUID):
        body (AnswerApproveRequest | AnswerEditRequest | AnswerRejectRequest |
            AnswerValueRequest): The body of `POST /v1/waits/{id}/answer`: exactly one answer (its
            `decision` and that decision's field) plus an optional `by`, `reason` and `digest`, all in
            one object (`{"decision": "reject", "feedback": "…", "by": "…"}`); any other field is
            refused (400 `invalid_body`). Each form is a complete object schema, so that client
            generators can build it. Example: {'decision': 'reject', 'feedback': 'shorter, and give it
            a title', 'by': 'ann@example.com', 'reason': 'the summary runs long'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Answered | ErrorResponse]
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
    body: AnswerApproveRequest
    | AnswerEditRequest
    | AnswerRejectRequest
    | AnswerValueRequest,
) -> Answered | ErrorResponse | None:
    """Answer a human wait

     Records a person's answer durably and returns the wait with its run (`run`: where the run stands
    right after the answer). What it does to the run is the engine's: a review's `approve` commits the
    step's output and `edit` commits the given `output` instead (the original is kept in the
    `wait_answered` event); a review's `reject` runs the step again (attempt + 1) with the `feedback` in
    its context, which opens a new review; an approval's `approve` lets the step run and its `reject`
    fails the run (error kind `rejected`); a question's `answer` runs the step again from its start with
    the value in its answers. The run is then usually `queued` and the server's runner, woken right
    away, carries it on; nothing executes in the request. The same answer again is a no-op (200, the
    wait unchanged, even if `by` differs); a different answer to a wait that is no longer open is 409.
    Wait deadlines are applied by the server's runner (every poll), as `cairn waits expire` does. On a
    wait whose agent has an approver policy the answer is the caller's vote: one per principal; the vote
    that meets the policy answers the wait, the others leave it open (see `GET /v1/waits/{id}/ballot`).

    Args:
        id (UUID):
        body (AnswerApproveRequest | AnswerEditRequest | AnswerRejectRequest |
            AnswerValueRequest): The body of `POST /v1/waits/{id}/answer`: exactly one answer (its
            `decision` and that decision's field) plus an optional `by`, `reason` and `digest`, all in
            one object (`{"decision": "reject", "feedback": "…", "by": "…"}`); any other field is
            refused (400 `invalid_body`). Each form is a complete object schema, so that client
            generators can build it. Example: {'decision': 'reject', 'feedback': 'shorter, and give it
            a title', 'by': 'ann@example.com', 'reason': 'the summary runs long'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Answered | ErrorResponse
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
    body: AnswerApproveRequest
    | AnswerEditRequest
    | AnswerRejectRequest
    | AnswerValueRequest,
) -> Response[Answered | ErrorResponse]:
    """Answer a human wait

     Records a person's answer durably and returns the wait with its run (`run`: where the run stands
    right after the answer). What it does to the run is the engine's: a review's `approve` commits the
    step's output and `edit` commits the given `output` instead (the original is kept in the
    `wait_answered` event); a review's `reject` runs the step again (attempt + 1) with the `feedback` in
    its context, which opens a new review; an approval's `approve` lets the step run and its `reject`
    fails the run (error kind `rejected`); a question's `answer` runs the step again from its start with
    the value in its answers. The run is then usually `queued` and the server's runner, woken right
    away, carries it on; nothing executes in the request. The same answer again is a no-op (200, the
    wait unchanged, even if `by` differs); a different answer to a wait that is no longer open is 409.
    Wait deadlines are applied by the server's runner (every poll), as `cairn waits expire` does. On a
    wait whose agent has an approver policy the answer is the caller's vote: one per principal; the vote
    that meets the policy answers the wait, the others leave it open (see `GET /v1/waits/{id}/ballot`).

    Args:
        id (UUID):
        body (AnswerApproveRequest | AnswerEditRequest | AnswerRejectRequest |
            AnswerValueRequest): The body of `POST /v1/waits/{id}/answer`: exactly one answer (its
            `decision` and that decision's field) plus an optional `by`, `reason` and `digest`, all in
            one object (`{"decision": "reject", "feedback": "…", "by": "…"}`); any other field is
            refused (400 `invalid_body`). Each form is a complete object schema, so that client
            generators can build it. Example: {'decision': 'reject', 'feedback': 'shorter, and give it
            a title', 'by': 'ann@example.com', 'reason': 'the summary runs long'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Answered | ErrorResponse]
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
    body: AnswerApproveRequest
    | AnswerEditRequest
    | AnswerRejectRequest
    | AnswerValueRequest,
) -> Answered | ErrorResponse | None:
    """Answer a human wait

     Records a person's answer durably and returns the wait with its run (`run`: where the run stands
    right after the answer). What it does to the run is the engine's: a review's `approve` commits the
    step's output and `edit` commits the given `output` instead (the original is kept in the
    `wait_answered` event); a review's `reject` runs the step again (attempt + 1) with the `feedback` in
    its context, which opens a new review; an approval's `approve` lets the step run and its `reject`
    fails the run (error kind `rejected`); a question's `answer` runs the step again from its start with
    the value in its answers. The run is then usually `queued` and the server's runner, woken right
    away, carries it on; nothing executes in the request. The same answer again is a no-op (200, the
    wait unchanged, even if `by` differs); a different answer to a wait that is no longer open is 409.
    Wait deadlines are applied by the server's runner (every poll), as `cairn waits expire` does. On a
    wait whose agent has an approver policy the answer is the caller's vote: one per principal; the vote
    that meets the policy answers the wait, the others leave it open (see `GET /v1/waits/{id}/ballot`).

    Args:
        id (UUID):
        body (AnswerApproveRequest | AnswerEditRequest | AnswerRejectRequest |
            AnswerValueRequest): The body of `POST /v1/waits/{id}/answer`: exactly one answer (its
            `decision` and that decision's field) plus an optional `by`, `reason` and `digest`, all in
            one object (`{"decision": "reject", "feedback": "…", "by": "…"}`); any other field is
            refused (400 `invalid_body`). Each form is a complete object schema, so that client
            generators can build it. Example: {'decision': 'reject', 'feedback': 'shorter, and give it
            a title', 'by': 'ann@example.com', 'reason': 'the summary runs long'}.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Answered | ErrorResponse
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
