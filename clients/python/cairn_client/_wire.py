"""Shared between the sync and the async client: the token, errors, and
the check that tells an older server from a plain 404 or 400."""

from __future__ import annotations

import json
from collections.abc import Generator, Iterable
from typing import Any, TypeVar

import httpx

from . import errors
from ._ops import Call, Op
from ._retry import retry_after

T = TypeVar("T")


class BearerToken(httpx.Auth):
    """Sends `Authorization: Bearer TOKEN`; its repr never shows the token."""

    def __init__(self, token: str):
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request

    def __repr__(self) -> str:
        return "BearerToken(<hidden>)"


def api_error(response: httpx.Response, operation: str) -> errors.ApiError:
    """The typed error of an error answer (its body must have been read)."""
    try:
        info = response.json()["error"]
        code, message = str(info["code"]), str(info["message"])
    except (ValueError, KeyError, TypeError):
        info = None
        code = f"http_{response.status_code}"
        message = response.text[:200] or response.reason_phrase
    cls = errors.api_error_class(response.status_code)
    return cls(response.status_code, code, message, operation=operation,
               details=info if isinstance(info, dict) else None,
               retry_after=retry_after(response))


def read_success(call: Call[T], response: httpx.Response) -> T:
    """The model of a success answer, or `ResponseNotUnderstood`."""
    try:
        return call.read(response)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise errors.ResponseNotUnderstood(call.op.id, f"{type(e).__name__}: {e}") from None


def may_be_older_server(error: errors.ApiError, call: Call[Any]) -> bool:
    """Whether the server's API document could explain this error.

    A route the server does not have is 404 `not_found` (or 405); a body
    field or a query parameter it does not know is 400 `invalid_body` or
    `bad_query`.
    """
    if error.code in ("not_found", "method_not_allowed"):
        return True
    if error.code == "invalid_body" and call.body:
        return True
    return error.code == "bad_query" and bool(call.params)


def what_server_lacks(doc: dict[str, Any], call: Call[Any]) -> str | None:
    """What of `call` the server's OpenAPI document lacks (None: nothing)."""
    operation = doc.get("paths", {}).get(call.op.path, {}).get(call.op.method.lower())
    if not isinstance(operation, dict):
        return f"the route {call.op.method} {call.op.path}"
    known_params = {p.get("name") for p in operation.get("parameters", [])}
    for name in call.params:
        if name not in known_params:
            return f"the query parameter `{name}`"
    schema = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    known_fields = set(_properties(doc, schema.get("schema", {})))
    for name in call.body or {}:
        if name not in known_fields:
            return f"the field `{name}`"
    return None


def _properties(doc: dict[str, Any], schema: Any, depth: int = 0) -> Iterable[str]:
    """Every property name a schema (through $ref, allOf, oneOf, anyOf) allows."""
    if not isinstance(schema, dict) or depth > 8:
        return
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = doc
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        yield from _properties(doc, target, depth + 1)
    yield from schema.get("properties", {})
    for key in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(key, []):
            yield from _properties(doc, sub, depth + 1)


def unsupported(doc: Any, call: Call[Any],
                error: errors.ApiError) -> errors.UnsupportedByServer | None:
    """`UnsupportedByServer` if the server's document lacks the call.

    A server with no document at all lacks the route if it answered 404
    `not_found` for it; for a 400 nothing can be told.
    """
    if doc is None:
        if error.code in ("not_found", "method_not_allowed"):
            return errors.UnsupportedByServer(call.op.id, "the route (and any API document)")
        return None
    lacks = what_server_lacks(doc, call)
    if lacks is None:
        return None
    version = doc.get("info", {}).get("version")
    return errors.UnsupportedByServer(call.op.id, lacks, str(version) if version else None)


def operations_lacking(doc: dict[str, Any], ops: Iterable[Op]) -> list[str]:
    """The `operationId`s of `ops` whose route the document does not have."""
    paths = doc.get("paths", {})
    return [op.id for op in ops if op.method.lower() not in paths.get(op.path, {})]


def parse_doc(response: httpx.Response) -> dict[str, Any] | None:
    """The server's API document, or None when it serves none."""
    if response.status_code != 200:
        return None
    try:
        doc = response.json()
    except json.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None
