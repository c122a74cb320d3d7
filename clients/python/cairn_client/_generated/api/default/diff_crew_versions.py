from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.crew_diff import CrewDiff
from ...models.error_response import ErrorResponse
from ...types import UNSET, Response


def _get_kwargs(
    name: str,
    *,
    from_: str,
    to: str,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["from"] = from_

    params["to"] = to

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/crews/{name}/diff".format(
            name=quote(str(name), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> CrewDiff | ErrorResponse | None:
    if response.status_code == 200:
        response_200 = CrewDiff.from_dict(response.json())

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
) -> Response[CrewDiff | ErrorResponse]:
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
    from_: str,
    to: str,
) -> Response[CrewDiff | ErrorResponse]:
    """Compare two crew versions

     How version `to` differs from `from`, step by step, and whether each unfinished run of `from` can
    move to `to` (and if not, which step stops it): `cairn crews diff --json`. Each side is a version
    this server loaded or one stored (a version, or the start of a fingerprint).

    Args:
        name (str):
        from_ (str):
        to (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CrewDiff | ErrorResponse]
    """

    kwargs = _get_kwargs(
        name=name,
        from_=from_,
        to=to,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient | Client,
    from_: str,
    to: str,
) -> CrewDiff | ErrorResponse | None:
    """Compare two crew versions

     How version `to` differs from `from`, step by step, and whether each unfinished run of `from` can
    move to `to` (and if not, which step stops it): `cairn crews diff --json`. Each side is a version
    this server loaded or one stored (a version, or the start of a fingerprint).

    Args:
        name (str):
        from_ (str):
        to (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CrewDiff | ErrorResponse
    """

    return sync_detailed(
        name=name,
        client=client,
        from_=from_,
        to=to,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient | Client,
    from_: str,
    to: str,
) -> Response[CrewDiff | ErrorResponse]:
    """Compare two crew versions

     How version `to` differs from `from`, step by step, and whether each unfinished run of `from` can
    move to `to` (and if not, which step stops it): `cairn crews diff --json`. Each side is a version
    this server loaded or one stored (a version, or the start of a fingerprint).

    Args:
        name (str):
        from_ (str):
        to (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[CrewDiff | ErrorResponse]
    """

    kwargs = _get_kwargs(
        name=name,
        from_=from_,
        to=to,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient | Client,
    from_: str,
    to: str,
) -> CrewDiff | ErrorResponse | None:
    """Compare two crew versions

     How version `to` differs from `from`, step by step, and whether each unfinished run of `from` can
    move to `to` (and if not, which step stops it): `cairn crews diff --json`. Each side is a version
    this server loaded or one stored (a version, or the start of a fingerprint).

    Args:
        name (str):
        from_ (str):
        to (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        CrewDiff | ErrorResponse
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            from_=from_,
            to=to,
        )
    ).parsed
