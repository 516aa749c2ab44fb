"""The synchronous client, :class:`Client`, and its event stream, :class:`EventStream`."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any, Generic, Optional, TypeVar, Union

import httpx

from . import _endpoints as api
from ._base import BaseClient, Call, finish, transport_error
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

__all__ = ["Client", "EventStream"]

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
DEFAULT_IDLE_TIMEOUT = 60.0


class Client(BaseClient):
    """A client of a Somna server (``somna run --serve``).

    :param base_url: the server's URL; default: ``$SOMNA_SERVER``, else ``http://127.0.0.1:7878``.
    :param token: the bearer token; default: ``$SOMNA_API_TOKEN``, else none (a server on
        loopback may run without one); ``""`` sends none whatever the environment says.
    :param timeout: seconds a request may take. Compaction and sleep wait for the LLM: with a
        real model, give them time.
    :param http_client: an ``httpx.Client`` to send with (proxies, TLS, limits); the client does
        not close one it was given.

    Use it as a context manager, or call :meth:`close`::

        with somna.Client("http://127.0.0.1:7878", token="s3cret") as client:
            client.send("smith", "Good morning!", name="Aldric")

    Every method raises :class:`~somna.ApiError` (a subclass by status) for an error answer,
    :class:`~somna.TransportError` when the server cannot be reached, and
    :class:`~somna.ProtocolError` for an answer it cannot read. Methods are safe to call from
    several threads at once.
    """

    def __init__(
        self,
        base_url: Optional[str] = None,
        token: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: Optional[httpx.Client] = None,
    ) -> None:
        super().__init__(base_url, token, timeout)
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client()

    def close(self) -> None:
        """Closes the connections (an ``http_client`` given to the constructor stays open)."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def _call(self, call: Call[T]) -> T:
        request = self._build(
            self._http, call.method, call.path, params=call.params, json=call.json
        )
        try:
            response = self._http.send(request)
        except httpx.RequestError as e:
            raise transport_error(e, f"{call.method} {self.base_url}{call.path}") from e
        return finish(call, response)

    # -- Server -----------------------------------------------------------------------------

    def health(self) -> Health:
        """``GET /healthz``: the server runs (needs no token)."""
        return self._call(api.health())

    def openapi(self) -> Any:
        """The server's OpenAPI document (``GET /v1/openapi.json``), as decoded JSON."""
        return self._call(api.openapi())

    # -- Agents -----------------------------------------------------------------------------

    def agents(self, *, include_retired: bool = False) -> AgentList:
        """Every hosted agent with a status summary; with `include_retired`, also the retired
        agents' ids (``.retired``)."""
        return self._call(api.agents(include_retired))

    def create_agent(self, agent: str, /, **config: Any) -> AgentConfig:
        """Creates and starts an agent; `config` takes the keys of an ``[[agents]]`` entry of
        runtime.toml (``persona``, ``model``, ``tick_every``, ``compaction={...}``,
        ``memory={...}``, ``tools=[...]``), the rest comes from ``[defaults]``.

        Raises :class:`~somna.Conflict` (``agent_exists``) when the id is or was in use, and
        :class:`~somna.InvalidRequest` (``invalid_config``, ``fields`` naming each key) for a
        config that does not validate.
        """
        return self._call(api.create_agent(agent, config))

    def status(self, agent: str) -> AgentStatus:
        """The agent's status: state, usage, counts, pending tool calls and config."""
        return self._call(api.status(agent))

    def config(self, agent: str) -> AgentConfig:
        """The agent's resolved config."""
        return self._call(api.config(agent))

    def configure(self, agent: str, /, **changes: Any) -> AgentConfig:
        """Changes the agent's config at run time (persisted), e.g.
        ``configure("smith", compaction={"sleep_threshold": 0.6})``; merged over earlier changes,
        validated as a whole, and applied at once. Returns the new config. A change that does not
        validate changes nothing: :class:`~somna.InvalidRequest` (``invalid_config``)."""
        return self._call(api.configure(agent, changes))

    def retire(self, agent: str) -> Retired:
        """Retires the agent: it is no longer hosted, and its id cannot be reused. Nothing is
        deleted; its history, archive, journal, facts and event log stay readable."""
        return self._call(api.retire(agent))

    # -- Input ------------------------------------------------------------------------------

    def send(self, agent: str, content: str, name: Optional[str] = None) -> Accepted:
        """Someone (`name`, when given) speaks to the agent; it owes a reply, which comes as an
        :class:`~somna.AgentReplied` event. Open :meth:`events` before sending, so as not to miss
        it. Returns once the input is in the agent's history."""
        return self._call(api.send(agent, content, name))

    def observe(self, agent: str, content: str) -> Accepted:
        """Something happens in the agent's world: journaled and added to its context; no reply
        is owed."""
        return self._call(api.observe(agent, content))

    def tool_result(self, agent: str, call_id: str, result: Any) -> Accepted:
        """The host's answer to a :class:`~somna.ToolCallRequested` (text, or any JSON-able value,
        sent as its JSON). Raises :class:`~somna.NotFound` (``unknown_tool_call``) when the agent
        does not wait for `call_id`."""
        return self._call(api.tool_result(agent, call_id, result))

    # -- Commands ---------------------------------------------------------------------------

    def compact(self, agent: str, force: bool = False) -> CompactionOutcome:
        """Compacts now: at the sleep threshold, or, with `force`, regardless of thresholds (a
        manual compaction). During a job it runs after it. Every outcome is a value (``done``,
        ``skipped``, ``failed``, ``stalled``); :class:`~somna.Busy` when too many commands wait.
        """
        return self._call(api.compact(agent, force))

    def sleep(self, agent: str) -> SleepResult:
        """Sleeps now: consolidation (journal to memory facts), reflection, then compaction at
        the sleep threshold."""
        return self._call(api.sleep(agent))

    def uncompact(self, agent: str, summary_seq: int) -> Restored:
        """Undoes the compaction whose summary is at `summary_seq` (a ``done`` outcome's
        ``summary_seq``): the archived originals go back in its place. :class:`~somna.NotFound`
        (``unknown_summary``) when history has no summary there."""
        return self._call(api.uncompact(agent, summary_seq))

    # -- Reads (retired agents too) -----------------------------------------------------------

    def history(
        self, agent: str, *, from_seq: Optional[int] = None, limit: Optional[int] = None
    ) -> MessagePage:
        """A page of the live history (what the next prompt holds) in seq order, from
        `from_seq` (default 0), at most `limit` (default 100, at most 1000) messages."""
        return self._call(api.history(agent, from_seq, limit))

    def archive(
        self, agent: str, *, from_seq: Optional[int] = None, limit: Optional[int] = None
    ) -> MessagePage:
        """A page of the archive (the originals compaction moved out of history) in seq order;
        a page never splits one seq, so it may hold a few more than `limit`."""
        return self._call(api.archive(agent, from_seq, limit))

    def search(self, agent: str, query: str, *, limit: Optional[int] = None) -> SearchHits:
        """BM25 keyword search over the agent's recent archive, best hits first (`limit`:
        default 10, at most 100)."""
        return self._call(api.search(agent, query, limit))

    def journal(
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
        """A page of journal entries, newest first; every filter is optional.

        :param source_type: ``observation``, ``note``, ``reflection``, ``compaction`` or
            ``extraction``.
        :param tags: entries with this tag, or with all of these tags.
        :param min_importance: entries at least this important (1 to 10).
        :param since: entries at or after: a ``timedelta`` (that long ago), a ``datetime`` (naive
            means UTC), or the API's text (``"1d"``, ``"90m"``, an RFC 3339 time).
        :param until: entries before; the same forms.
        :param limit: at most this many (default 50, at most 1000).
        :param cursor: the previous page's ``next_cursor``, for the next (older) page.
        """
        return self._call(
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

    def prompt(self, agent: str, input: Optional[str] = None) -> PromptView:
        """What the agent sees: the prompt its next LLM call would receive if `input` arrived now
        (message by message, the window's tokens by part, what retrieval recalled). Nothing is
        sent or written."""
        return self._call(api.prompt(agent, input))

    def facts(self, agent: str) -> list[Fact]:
        """The agent's memory facts, oldest first, with the journal entries each came from."""
        return self._call(api.facts(agent))

    def event_log(self, agent: str, *, limit: Optional[int] = None) -> list[LoggedEvent]:
        """The agent's durable event log (compactions, undos, maskings, failures, notes, sleeps),
        newest first; `limit`: default 50, at most 1000."""
        return self._call(api.event_log(agent, limit))

    # -- Scoped tokens (admin token only) -----------------------------------------------------

    def tokens(self) -> list[TokenInfo]:
        """Every scoped token by name (never a secret). :class:`~somna.Forbidden` with a scoped
        token: only the admin token manages tokens."""
        return self._call(api.tokens())

    def create_token(self, name: str, agents: str, access: str = "read") -> CreatedToken:
        """Makes a token that reaches only the agents whose id starts with `agents`, for
        ``read`` or ``read_write``; its ``token`` (the secret) is shown this once. A client made
        with it gets :class:`~somna.Forbidden` for any other agent, and only that tenant's agents
        and events in lists and streams."""
        return self._call(api.create_token(name, agents, access))

    def revoke_token(self, name: str) -> None:
        """Revokes a token: the server refuses it at once (other nodes within 2 s).
        :class:`~somna.NotFound` (``unknown_token``) when there is none."""
        return self._call(api.revoke_token(name))

    # -- Streams ----------------------------------------------------------------------------

    def events(
        self,
        agent: Optional[str] = None,
        *,
        types: Optional[Sequence[str]] = None,
        last_event_id: Optional[str] = None,
        reconnect: Reconnect = DEFAULT_RECONNECT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> EventStream[Event]:
        """The live event stream (``GET /v1/events``): replies, tool calls, compactions, sleeps
        ... of every agent, or of `agent`, as typed events (:class:`~somna.Event`); `types` keeps
        only those types (``["agent_replied", "tool_call_requested"]``).

        The stream is subscribed when this returns: open it before sending the input whose
        answer you wait for. Iterate over it; close it (or use it as a context manager) when
        done. When the connection drops it reconnects as `reconnect` says, sending
        ``Last-Event-ID`` (`last_event_id` resumes after a known one), and yields a
        :class:`~somna.Reconnected` first; the server replays what the stream missed (of its
        newest 4,096 events). After a restart of the server the events the old process sent
        after the last one received are gone: a :class:`~somna.ServerRestarted` says so, and
        every event of the new process follows. :meth:`follow_event_log` is the durable log.
        A connection that carries nothing for `idle_timeout` seconds (the server sends a
        keep-alive every 15) counts as dropped.
        """
        source = LiveSource(agent, list(types) if types else None)
        return EventStream(self, StreamState(source, last_event_id, reconnect, idle_timeout))

    def follow_event_log(
        self,
        agent: str,
        *,
        after: Optional[int] = None,
        reconnect: Reconnect = DEFAULT_RECONNECT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> EventStream[LoggedEvent]:
        """Follows the agent's durable event log (``GET /v1/agents/{id}/events`` as Server-Sent
        Events): each :class:`~somna.LoggedEvent` logged after `after` (a seq, such as the last
        one a host processed), or from now on, oldest first, as it is logged.

        Lossless: the seq is the event's SSE id, and a dropped connection (even a server
        restart) resumes after the last one received with ``Last-Event-ID``, without a gap or a
        repeat. Reconnects as `reconnect` says; see :meth:`events` for `idle_timeout`.
        """
        source = LogSource(agent, from_now=after is None)
        last = None if after is None else str(after)
        return EventStream(self, StreamState(source, last, reconnect, idle_timeout))


class EventStream(Generic[T]):
    """A resumable Server-Sent Events stream of the API: an iterator of typed events that
    reconnects by itself (see :class:`~somna.Reconnect`).

    It is connected (subscribed) once created. Iteration ends only when the stream is closed,
    which :meth:`close` does from any thread, or leaving its ``with`` block; when reconnecting
    fails for good, it raises the last error.
    """

    def __init__(self, client: Client, state: StreamState[T]) -> None:
        self._client = client
        self._state = state
        self._response: Optional[httpx.Response] = None
        self._lines: Optional[Iterator[str]] = None
        self._closed = threading.Event()
        self._open(0)

    @property
    def last_event_id(self) -> Optional[str]:
        """The id of the last event received (on the durable log: its seq), which a new stream
        can resume after."""
        return self._state.last_event_id

    @property
    def reconnects(self) -> int:
        """How many times the stream reconnected."""
        return self._state.reconnects

    def close(self) -> None:
        """Closes the stream: iteration ends (also in another thread blocked on it)."""
        self._closed.set()
        response = self._response
        if response is not None:
            # Closing a socket does not wake a thread blocked reading it; shutting it down does.
            network_stream = response.extensions.get("network_stream")
            sock = network_stream.get_extra_info("socket") if network_stream else None
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self._drop()

    def __enter__(self) -> EventStream[T]:
        return self

    def __exit__(
        self,
        exc_type: Optional[type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __iter__(self) -> EventStream[T]:
        return self

    def __next__(self) -> T:
        state = self._state
        while True:
            if state.pending:
                return state.pending.popleft()  # type: ignore[no-any-return]
            if self._closed.is_set() or self._lines is None:
                raise StopIteration
            try:
                line = next(self._lines)
            except StopIteration:
                failure = TransportError("the server closed the event stream")
            except Exception as e:
                if self._closed.is_set():
                    raise StopIteration from None
                if not isinstance(e, httpx.RequestError):
                    raise
                failure = transport_error(e, "the event stream broke")
            else:
                event = state.feed(line)
                if event is not None:
                    return event
                continue
            if self._closed.is_set():
                raise StopIteration
            self._reconnect(failure)

    def _reconnect(self, failure: SomnaError) -> None:
        """Reconnects after `failure`, or raises the last error when the policy gives up."""
        self._drop()
        policy = self._state.reconnect
        error = failure
        attempt = 0
        while True:
            attempt += 1
            if policy.gives_up(attempt):
                raise error
            if self._closed.wait(policy.delay(attempt)):
                return
            try:
                self._open(attempt)
                return
            except (TransportError, ServerError) as e:
                error = e

    def _open(self, attempts: int) -> None:
        """Makes the stream's opening read, if any, then connects."""
        client, state = self._client, self._state
        call = state.opening_call()
        if call is not None:
            state.read(client._call(call))
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
            response = client._http.send(request, stream=True)
        except httpx.RequestError as e:
            raise transport_error(e, f"cannot open the event stream {request.url}") from e
        if response.status_code != 200:
            try:
                body = response.read()
            except httpx.RequestError as e:
                raise transport_error(e, "cannot read the event stream's error") from e
            finally:
                response.close()
            raise error_from_response(response.status_code, body)
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            response.close()
            raise ProtocolError(f"{request.url} did not answer with an event stream")
        self._response, self._lines = response, response.iter_lines()
        state.connected(attempts)
        if self._closed.is_set():
            self._drop()

    def _drop(self) -> None:
        response, self._response, self._lines = self._response, None, None
        if response is not None:
            response.close()
