"""The exceptions of the client.

::

    SomnaError
    ├── ApiError               the server answered with an error (status, code, message, fields)
    │   ├── InvalidRequest     400, 413, 422: the request is wrong; do not send it again as it is
    │   ├── Unauthorized       401: the bearer token is missing or wrong
    │   ├── Forbidden          403: a scoped token does not reach that agent or route
    │   ├── NotFound           404: unknown agent, tool call, summary or endpoint
    │   ├── Conflict           409: the agent exists already, or another node hosts it
    │   │   └── Busy           409 ``busy``: the agent cannot take the command now; retry shortly
    │   ├── Gone               410: the agent was retired (its data can still be read)
    │   └── ServerError        5xx
    │       └── Unavailable    503: the agent does not answer, or the server is shutting down
    ├── TransportError         no answer: the connection failed, broke or timed out
    │   └── Timeout            no answer in time
    └── ProtocolError          an answer this client cannot read

Match on :attr:`ApiError.code`, the API's stable error code (``unknown_agent``, ``agent_exists``,
``invalid_config``, ...), never on the message.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Optional

from ._models import FieldError

__all__ = [
    "ApiError",
    "Busy",
    "Conflict",
    "Forbidden",
    "Gone",
    "InvalidRequest",
    "NotFound",
    "ProtocolError",
    "ServerError",
    "SomnaError",
    "Timeout",
    "TransportError",
    "Unauthorized",
    "Unavailable",
]


class SomnaError(Exception):
    """The base of every exception the client raises."""


class ApiError(SomnaError):
    """The server answered with an error: ``{"error": {"code", "message", "fields"?}}``."""

    status: int
    """The HTTP status."""
    code: str
    """The API's stable error code (``unknown_agent``, ``busy``, ...); ``http_error`` when the
    answer was not one of the API's (from a proxy, say)."""
    message: str
    """A readable explanation (never match on it)."""
    fields: list[FieldError]
    """The values of the request at fault (config keys, body fields, query parameters), when
    specific ones were."""

    def __init__(
        self, status: int, code: str, message: str, fields: Sequence[FieldError] = ()
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.fields = list(fields)

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (type(self), (self.status, self.code, self.message, self.fields))


class InvalidRequest(ApiError):
    """400, 413 or 422: a bad parameter, body, config or input (``bad_request``, ``bad_json``,
    ``invalid_agent_id``, ``invalid_body``, ``invalid_config``, ``invalid_input``,
    ``payload_too_large``, ``input_too_large``); :attr:`fields` names what is at fault."""


class Unauthorized(ApiError):
    """401 ``unauthorized``: the bearer token is missing or wrong."""


class Forbidden(ApiError):
    """403 ``forbidden``: a scoped token asked for what it does not reach (another tenant's
    agent, a command with a read token, the metrics, token management)."""


class NotFound(ApiError):
    """404: ``unknown_agent``, ``unknown_tool_call``, ``unknown_summary``, ``unknown_token`` or
    ``not_found``."""


class Conflict(ApiError):
    """409: ``agent_exists`` (ids are never reused, not even a retired agent's), ``not_hosted``
    (on a cluster, another node runs the agent) or ``token_exists``."""


class Busy(Conflict):
    """409 ``busy``: the agent cannot take the command now (too many commands wait, it is
    stopping, or an undo meets a compaction); try again shortly."""


class Gone(ApiError):
    """410 ``agent_retired``: the agent was retired; its history, archive, journal, facts and
    event log can still be read."""


class ServerError(ApiError):
    """5xx: the server failed (``internal``)."""


class Unavailable(ServerError):
    """503: ``unavailable`` (the agent does not answer) or ``shutting_down``; try again later."""


class TransportError(SomnaError):
    """No answer: the server could not be reached, or the connection broke or timed out. The
    underlying exception is the ``__cause__``."""


class Timeout(TransportError):
    """No answer within the client's timeout."""


class ProtocolError(SomnaError):
    """The server answered something this client cannot read (not JSON, or a required field
    missing): a server of another API version, or not a Somna server."""


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    413: InvalidRequest,
    422: InvalidRequest,
    503: Unavailable,
}


def error_from_response(status: int, body: bytes) -> ApiError:
    """The exception for an error answer with HTTP `status` and `body`."""
    code, message, fields = "http_error", body.decode("utf-8", "replace").strip(), []
    detail: Optional[object] = None
    with contextlib.suppress(ValueError, KeyError, TypeError):
        detail = json.loads(body)["error"]
    if isinstance(detail, dict) and isinstance(detail.get("code"), str):
        code = detail["code"]
        message = str(detail.get("message", ""))
        fields = [
            FieldError(field=str(f.get("field", "")), message=str(f.get("message", "")))
            for f in detail.get("fields") or []
            if isinstance(f, dict)
        ]
    if code == "busy":
        cls: type[ApiError] = Busy
    elif status in _BY_STATUS:
        cls = _BY_STATUS[status]
    elif status >= 500:
        cls = ServerError
    else:
        cls = ApiError
    return cls(status, code, message or f"HTTP {status}", fields)
