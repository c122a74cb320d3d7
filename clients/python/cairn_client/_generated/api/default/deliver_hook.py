from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_response import ErrorResponse
from ...models.sent import Sent
from ...types import Response


def _get_kwargs(
    name: str,
    *,
    body: Any,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/hooks/{name}".format(
            name=quote(str(name), safe=""),
        ),
    }

    _kwargs["json"] = body

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorResponse | Sent | None:
    if response.status_code == 200:
        response_200 = Sent.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorResponse.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorResponse.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = ErrorResponse.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = ErrorResponse.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = ErrorResponse.from_dict(response.json())

        return response_413

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
) -> Response[ErrorResponse | Sent]:
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
    body: Any,
) -> Response[ErrorResponse | Sent]:
    """Deliver to an inbound webhook

     Needs no API token: the hook checks its caller by its scheme (`cairn hooks create`): `token`,
    `Authorization: Bearer ch_…`; `standard` (Standard Webhooks), `webhook-id`, `webhook-timestamp`
    (within 5 minutes) and `webhook-signature: v1,…`; `github`, `X-Hub-Signature-256: sha256=…` over the
    raw body. A verified body (JSON) is mapped to a signal by the hook's templates and sent as `POST
    /v1/signals` would (by `hook:NAME`, `via: hook`, audited); its idempotency id is the hook's `id`
    template, else the scheme's delivery header (`idempotency-key`, `webhook-id`, `X-GitHub-Delivery`),
    so a delivery sent again is a no-op.

    Args:
        name (str):
        body (Any): Any JSON: what the sender sends.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | Sent]
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
    body: Any,
) -> ErrorResponse | Sent | None:
    """Deliver to an inbound webhook

     Needs no API token: the hook checks its caller by its scheme (`cairn hooks create`): `token`,
    `Authorization: Bearer ch_…`; `standard` (Standard Webhooks), `webhook-id`, `webhook-timestamp`
    (within 5 minutes) and `webhook-signature: v1,…`; `github`, `X-Hub-Signature-256: sha256=…` over the
    raw body. A verified body (JSON) is mapped to a signal by the hook's templates and sent as `POST
    /v1/signals` would (by `hook:NAME`, `via: hook`, audited); its idempotency id is the hook's `id`
    template, else the scheme's delivery header (`idempotency-key`, `webhook-id`, `X-GitHub-Delivery`),
    so a delivery sent again is a no-op.

    Args:
        name (str):
        body (Any): Any JSON: what the sender sends.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | Sent
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
    body: Any,
) -> Response[ErrorResponse | Sent]:
    """Deliver to an inbound webhook

     Needs no API token: the hook checks its caller by its scheme (`cairn hooks create`): `token`,
    `Authorization: Bearer ch_…`; `standard` (Standard Webhooks), `webhook-id`, `webhook-timestamp`
    (within 5 minutes) and `webhook-signature: v1,…`; `github`, `X-Hub-Signature-256: sha256=…` over the
    raw body. A verified body (JSON) is mapped to a signal by the hook's templates and sent as `POST
    /v1/signals` would (by `hook:NAME`, `via: hook`, audited); its idempotency id is the hook's `id`
    template, else the scheme's delivery header (`idempotency-key`, `webhook-id`, `X-GitHub-Delivery`),
    so a delivery sent again is a no-op.

    Args:
        name (str):
        body (Any): Any JSON: what the sender sends.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorResponse | Sent]
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
    body: Any,
) -> ErrorResponse | Sent | None:
    """Deliver to an inbound webhook

     Needs no API token: the hook checks its caller by its scheme (`cairn hooks create`): `token`,
    `Authorization: Bearer ch_…`; `standard` (Standard Webhooks), `webhook-id`, `webhook-timestamp`
    (within 5 minutes) and `webhook-signature: v1,…`; `github`, `X-Hub-Signature-256: sha256=…` over the
    raw body. A verified body (JSON) is mapped to a signal by the hook's templates and sent as `POST
    /v1/signals` would (by `hook:NAME`, `via: hook`, audited); its idempotency id is the hook's `id`
    template, else the scheme's delivery header (`idempotency-key`, `webhook-id`, `X-GitHub-Delivery`),
    so a delivery sent again is a no-op.

    Args:
        name (str):
        body (Any): Any JSON: what the sender sends.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorResponse | Sent
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            body=body,
        )
    ).parsed
