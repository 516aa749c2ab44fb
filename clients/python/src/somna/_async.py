"""The asynchronous client, :class:`AsyncClient`, and its event stream,
:class:`AsyncEventStream`: the same API as :class:`~somna.Client`, with coroutines."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Any, Generic, Optional, TypeVar, Union

import httpx

from . import _endpoints as api
from ._base import BaseClient, Call, finish, transport_error
from ._client import DEFAULT_IDLE_TIMEOUT, DEFAULT_TIMEOUT
from ._endpoints import TimeBound
from ._errors import ProtocolError, ServerError, SomnaError, TransportError, error_from_response
from ._events import Event
from ._models import (
    Accepted,
    AgentConfig,
    AgentList,
    AgentStatus,
    CompactionOutcome,
    CreatedToken,
    Fact,
    Health,
    JournalPage,
    LoggedEvent,
    MessagePage,
    PromptView,
    Restored,
    Retired,
    SearchHits,
    SleepResult,
    TokenInfo,
)
from ._sse import DEFAULT_RECONNECT, LiveSource, LogSource, Reconnect, StreamState

__all__ = ["AsyncClient", "AsyncEventStream"]

T = TypeVar("T")


class AsyncClient(BaseClient):
    """The asynchronous twin of :class:`~somna.Client`: the same methods, as coroutines, and
    event streams as async iterators.

    ::

        async with somna.AsyncClient("http://127.0.0.1:7878", token="s3cret") as client:
            async with client.events(agent="smith") as events:
                await client.send("smith", "Good morning!", name="Aldric")
                async for event in events:
                    ...

    :param http_client: an ``httpx.AsyncClient`` to send with; the client does not close one it
        was given. The other parameters are :class:`~somna.Client`'s.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        token: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: Optional[httpx.AsyncClient] = None,
    ) -> None:
        super().__init__(base_url, token, timeout)
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient()

    async def aclose(self) -> None:
        """Closes the connections (an ``http_client`` given to the constructor stays open)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.aclose()

    async def _call(self, call: Call[T]) -> T:
        request = self._build(
            self._http, call.method, call.path, params=call.params, json=call.json
        )
        try:
            response = await self._http.send(request)
        except httpx.RequestError as e:
            raise transport_error(e, f"{call.method} {self.base_url}{call.path}") from e
        return finish(call, response)

    async def health(self) -> Health:
        """See :meth:`Client.health() <somna.Client.health>`."""
        return await self._call(api.health())

    async def openapi(self) -> Any:
        """See :meth:`Client.openapi() <somna.Client.openapi>`."""
        return await self._call(api.openapi())

    async def agents(self, *, include_retired: bool = False) -> AgentList:
        """See :meth:`Client.agents() <somna.Client.agents>`."""
        return await self._call(api.agents(include_retired))

    async def create_agent(self, agent: str, /, **config: Any) -> AgentConfig:
        """See :meth:`Client.create_agent() <somna.Client.create_agent>`."""
        return await self._call(api.create_agent(agent, config))

    async def status(self, agent: str) -> AgentStatus:
        """See :meth:`Client.status() <somna.Client.status>`."""
        return await self._call(api.status(agent))

    async def config(self, agent: str) -> AgentConfig:
        """See :meth:`Client.config() <somna.Client.config>`."""
        return await self._call(api.config(agent))

    async def configure(self, agent: str, /, **changes: Any) -> AgentConfig:
        """See :meth:`Client.configure() <somna.Client.configure>`."""
        return await self._call(api.configure(agent, changes))

    async def retire(self, agent: str) -> Retired:
        """See :meth:`Client.retire() <somna.Client.retire>`."""
        return await self._call(api.retire(agent))

    async def send(self, agent: str, content: str, name: Optional[str] = None) -> Accepted:
        """See :meth:`Client.send() <somna.Client.send>`."""
        return await self._call(api.send(agent, content, name))

    async def observe(self, agent: str, content: str) -> Accepted:
        """See :meth:`Client.observe() <somna.Client.observe>`."""
        return await self._call(api.observe(agent, content))

    async def tool_result(self, agent: str, call_id: str, result: Any) -> Accepted:
        """See :meth:`Client.tool_result() <somna.Client.tool_result>`."""
        return await self._call(api.tool_result(agent, call_id, result))

    async def compact(self, agent: str, force: bool = False) -> CompactionOutcome:
        """See :meth:`Client.compact() <somna.Client.compact>`."""
        return await self._call(api.compact(agent, force))

    async def sleep(self, agent: str) -> SleepResult:
        """See :meth:`Client.sleep() <somna.Client.sleep>`."""
        return await self._call(api.sleep(agent))

    async def uncompact(self, agent: str, summary_seq: int) -> Restored:
        """See :meth:`Client.uncompact() <somna.Client.uncompact>`."""
        return await self._call(api.uncompact(agent, summary_seq))

    async def history(
        self, agent: str, *, from_seq: Optional[int] = None, limit: Optional[int] = None
    ) -> MessagePage:
        """See :meth:`Client.history() <somna.Client.history>`."""
        return await self._call(api.history(agent, from_seq, limit))

    async def archive(
        self, agent: str, *, from_seq: Optional[int] = None, limit: Optional[int] = None
    ) -> MessagePage:
        """See :meth:`Client.archive() <somna.Client.archive>`."""
        return await self._call(api.archive(agent, from_seq, limit))

    async def search(self, agent: str, query: str, *, limit: Optional[int] = None) -> SearchHits:
        """See :meth:`Client.search() <somna.Client.search>`."""
        return await self._call(api.search(agent, query, limit))

    async def journal(
        self,
        agent: str,
        *,
        source_type: Optional[str] = None,
        tags: Union[str, Sequence[str], None] = None,
        min_importance: Optional[int] = None,
        since: Optional[TimeBound] = None,
        until: Optional[TimeBound] = None,
        limit: Optional[int] = None,
        cursor: Optional[int] = None,
    ) -> JournalPage:
        """See :meth:`Client.journal() <somna.Client.journal>`."""
        return await self._call(
            api.journal(
                agent,
                source_type=source_type,
                tags=tags,
                min_importance=min_importance,
                since=since,
                until=until,
                limit=limit,
                cursor=cursor,
            )
        )

    async def prompt(self, agent: str, input: Optional[str] = None) -> PromptView:
        """See :meth:`Client.prompt() <somna.Client.prompt>`."""
        return await self._call(api.prompt(agent, input))

    async def facts(self, agent: str) -> list[Fact]:
        """See :meth:`Client.facts() <somna.Client.facts>`."""
        return await self._call(api.facts(agent))

    async def event_log(self, agent: str, *, limit: Optional[int] = None) -> list[LoggedEvent]:
        """See :meth:`Client.event_log() <somna.Client.event_log>`."""
        return await self._call(api.event_log(agent, limit))

    async def tokens(self) -> list[TokenInfo]:
        """See :meth:`Client.tokens() <somna.Client.tokens>`."""
        return await self._call(api.tokens())

    async def create_token(self, name: str, agents: str, access: str = "read") -> CreatedToken:
        """See :meth:`Client.create_token() <somna.Client.create_token>`."""
        return await self._call(api.create_token(name, agents, access))

    async def revoke_token(self, name: str) -> None:
        """See :meth:`Client.revoke_token() <somna.Client.revoke_token>`."""
        return await self._call(api.revoke_token(name))

    def events(
        self,
        agent: Optional[str] = None,
        *,
        types: Optional[Sequence[str]] = None,
        last_event_id: Optional[str] = None,
        reconnect: Reconnect = DEFAULT_RECONNECT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> AsyncEventStream[Event]:
        """The live event stream; see :meth:`Client.events() <somna.Client.events>`.

        Not a coroutine: the stream connects when its ``async with`` block is entered (use that
        to be subscribed before sending), or else at the first ``async for``.
        """
        source = LiveSource(agent, list(types) if types else None)
        return AsyncEventStream(self, StreamState(source, last_event_id, reconnect, idle_timeout))

    def follow_event_log(
        self,
        agent: str,
        *,
        after: Optional[int] = None,
        reconnect: Reconnect = DEFAULT_RECONNECT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> AsyncEventStream[LoggedEvent]:
        """Follows the durable event log; see
        :meth:`Client.follow_event_log() <somna.Client.follow_event_log>` and :meth:`events`."""
        source = LogSource(agent, from_now=after is None)
        last = None if after is None else str(after)
        return AsyncEventStream(self, StreamState(source, last, reconnect, idle_timeout))


class AsyncEventStream(Generic[T]):
    """The asynchronous twin of :class:`~somna.EventStream`: an async iterator of typed events
    that reconnects by itself. It connects on entering ``async with`` (or at the first
    ``async for``); iteration ends when it is closed (:meth:`aclose`, or leaving the block)."""

    def __init__(self, client: AsyncClient, state: StreamState[T]) -> None:
        self._client = client
        self._state = state
        self._response: Optional[httpx.Response] = None
        self._lines: Optional[AsyncIterator[str]] = None
        self._opened = False
        self._closed = False

    @property
    def last_event_id(self) -> Optional[str]:
        """See :attr:`EventStream.last_event_id <somna.EventStream.last_event_id>`."""
        return self._state.last_event_id

    @property
    def reconnects(self) -> int:
        """How many times the stream reconnected."""
        return self._state.reconnects

    async def aclose(self) -> None:
        """Closes the stream: iteration ends."""
        self._closed = True
        await self._drop()

    async def __aenter__(self) -> AsyncEventStream[T]:
        await self._ensure_open()
        return self

    async def __aexit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncEventStream[T]:
        return self

    async def __anext__(self) -> T:
        await self._ensure_open()
        state = self._state
        while True:
            if state.pending:
                return state.pending.popleft()  # type: ignore[no-any-return]
            if self._closed or self._lines is None:
                raise StopAsyncIteration
            try:
                line = await self._lines.__anext__()
            except StopAsyncIteration:
                failure = TransportError("the server closed the event stream")
            except Exception as e:
                if self._closed:
                    raise StopAsyncIteration from None
                if not isinstance(e, httpx.RequestError):
                    raise
                failure = transport_error(e, "the event stream broke")
            else:
                event = state.feed(line)
                if event is not None:
                    return event
                continue
            if self._closed:
                raise StopAsyncIteration
            await self._reconnect(failure)

    async def _ensure_open(self) -> None:
        if not self._opened and not self._closed:
            self._opened = True
            await self._open(0)

    async def _reconnect(self, failure: SomnaError) -> None:
        """Reconnects after `failure`, or raises the last error when the policy gives up."""
        await self._drop()
        policy = self._state.reconnect
        error = failure
        attempt = 0
        while True:
            attempt += 1
            if policy.gives_up(attempt):
                raise error
            await asyncio.sleep(policy.delay(attempt))
            if self._closed:
                return
            try:
                await self._open(attempt)
                return
            except (TransportError, ServerError) as e:
                error = e

    async def _open(self, attempts: int) -> None:
        """Makes the stream's opening read, if any, then connects."""
        client, state = self._client, self._state
        call = state.opening_call()
        if call is not None:
            state.read(await client._call(call))
        timeout = httpx.Timeout(client.timeout, read=state.idle_timeout)
        request = client._build(
            client._http,
            "GET",
            state.source.path,
            params=state.source.params,
            headers=state.headers(),
            timeout=timeout,
        )
        try:
            response = await client._http.send(request, stream=True)
        except httpx.RequestError as e:
            raise transport_error(e, f"cannot open the event stream {request.url}") from e
        if response.status_code != 200:
            try:
                body = await response.aread()
            except httpx.RequestError as e:
                raise transport_error(e, "cannot read the event stream's error") from e
            finally:
                await response.aclose()
            raise error_from_response(response.status_code, body)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            await response.aclose()
            raise ProtocolError(f"{request.url} did not answer with an event stream")
        self._response, self._lines = response, response.aiter_lines()
        state.connected(attempts)
        if self._closed:
            await self._drop()

    async def _drop(self) -> None:
        response, self._response, self._lines = self._response, None, None
        if response is not None:
            await response.aclose()
