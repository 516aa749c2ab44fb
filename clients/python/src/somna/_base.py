"""What the sync and the async client share: settings, request building, and turning answers into
results or exceptions. The clients differ only in how they send."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Generic, Optional, TypeVar, Union

import httpx

from ._errors import ProtocolError, Timeout, TransportError, error_from_response
from ._version import __version__

T = TypeVar("T")

#: Query parameters, in order (a name may repeat).
Params = Sequence[tuple[str, str]]

DEFAULT_BASE_URL = "http://127.0.0.1:7878"
"""Where ``somna run --serve`` listens by default."""
BASE_URL_ENV = "SOMNA_SERVER"
"""The environment variable the base URL comes from when none is given (as for the CLI)."""
TOKEN_ENV = "SOMNA_API_TOKEN"
"""The environment variable the bearer token comes from when none is given (as for the CLI)."""


@dataclass(frozen=True)
class Call(Generic[T]):
    """One API request and how to read its answer."""

    method: str
    path: str
    parse: Callable[[Any], T]
    params: Params = ()
    json: Any = None


class BaseClient:
    """Settings and request building common to :class:`~somna.Client` and
    :class:`~somna.AsyncClient`."""

    def __init__(self, base_url: Optional[str], token: Optional[str], timeout: float) -> None:
        base_url = base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        self.base_url = base_url.rstrip("/")
        """The server's URL, e.g. ``http://127.0.0.1:7878``."""
        self.timeout = timeout
        """Seconds a request may take (connecting, sending, waiting for the answer)."""
        self._token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        self._headers = {"User-Agent": f"somna-python/{__version__}"}
        if self._token:
            self._headers["Authorization"] = f"Bearer {self._token}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base_url!r})"

    def _build(
        self,
        http: Union[httpx.Client, httpx.AsyncClient],
        method: str,
        path: str,
        *,
        params: Params = (),
        json: Any = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[httpx.Timeout] = None,
    ) -> httpx.Request:
        """The request for `path` (which starts with ``/``), with the token."""
        all_headers = dict(self._headers)
        all_headers["Accept"] = "application/json"
        all_headers.update(headers or {})
        return http.build_request(
            method,
            self.base_url + path,
            params=list(params) or None,
            json=json,
            headers=all_headers,
            timeout=timeout or httpx.Timeout(self.timeout),
        )


def finish(call: Call[T], response: httpx.Response) -> T:
    """The result of `call` from its (read) `response`, or the API's error raised."""
    if response.status_code >= 400:
        raise error_from_response(response.status_code, response.content)
    if response.status_code == 204:
        return call.parse(None)
    try:
        return call.parse(response.json())
    except (KeyError, TypeError, ValueError) as e:
        raise ProtocolError(
            f"{call.method} {call.path}: cannot read the answer ({response.status_code}): {e}"
        ) from e


def transport_error(e: httpx.RequestError, what: str) -> TransportError:
    """Our exception for httpx's `e`, which happened while doing `what`."""
    cls = Timeout if isinstance(e, httpx.TimeoutException) else TransportError
    return cls(f"{what}: {type(e).__name__}: {e}" if str(e) else f"{what}: {type(e).__name__}")
