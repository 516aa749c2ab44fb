"""Server-Sent Events without I/O: the line decoder, the reconnection policy, and the state of one
resumable stream, which the sync and the async event streams drive.

A stream remembers the last ``id:`` it received and sends it back as ``Last-Event-ID`` when it
reconnects, so that a server which numbers its events (the durable event log does: each id is the
event's seq, which survives a restart) resumes after it, with nothing lost or repeated.
"""

from __future__ import annotations

import json
import random
from collections import deque
from dataclasses import dataclass
from typing import Any, Generic, Optional, TypeVar

from . import _endpoints
from ._base import Call, Params
from ._errors import ProtocolError
from ._events import Event, Reconnected, parse_event
from ._models import LoggedEvent

__all__ = ["Reconnect"]

T = TypeVar("T")

#: Most events a log stream that lost its connection before its first event reads back from the
#: JSON listing (the newest are listed; see ``LogSource``).
CATCH_UP_LIMIT = 1000


@dataclass(frozen=True)
class ServerSentEvent:
    """One event of a ``text/event-stream``."""

    data: str
    event: str = "message"
    id: Optional[str] = None


class SSEDecoder:
    """Turns the lines of a ``text/event-stream`` into events, as the WHATWG HTML standard
    describes (``data``, ``event`` and ``id`` fields; comments and other fields ignored)."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._last_id: Optional[str] = None

    def feed(self, line: str) -> Optional[ServerSentEvent]:
        """Takes one line (without its end); returns the event a blank line completes."""
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = ServerSentEvent("\n".join(self._data), self._event or "message", self._last_id)
            self._data, self._event = [], ""
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value or None
        return None


@dataclass(frozen=True)
class Reconnect:
    """How an event stream reconnects when its connection drops (a server restart, a network
    failure, a proxy timeout).

    Attempts are spaced by an exponential backoff from `initial_delay` to `max_delay` seconds,
    randomized (each wait is between half and all of its step) so that many clients do not all
    come back at once. After `max_attempts` failed attempts in a row the stream raises the last
    error; ``None`` never gives up, ``0`` does not reconnect at all. An error that retrying cannot
    fix (401, 404: a 4xx answer) is raised at once.
    """

    max_attempts: Optional[int] = 10
    initial_delay: float = 0.1
    max_delay: float = 5.0

    def gives_up(self, attempt: int) -> bool:
        """Whether attempt number `attempt` (from 1) is one too many."""
        return self.max_attempts is not None and attempt > self.max_attempts

    def delay(self, attempt: int) -> float:
        """Seconds to wait before attempt number `attempt` (from 1)."""
        step = min(self.max_delay, self.initial_delay * 2 ** min(attempt - 1, 32))
        return random.uniform(step / 2, step)


DEFAULT_RECONNECT = Reconnect()
"""The default policy of the event streams."""


class Source(Generic[T]):
    """An endpoint that streams events: where it is and how its events read."""

    path: str
    params: Params = ()
    #: Whether the stream yields a :class:`Reconnected` after each reconnection.
    marks_reconnects = False

    def parse(self, sse: ServerSentEvent) -> T:
        raise NotImplementedError

    def opening_call(self, last_event_id: Optional[str], started: bool) -> Optional[Call[Any]]:
        """The JSON read to make before (re)connecting, if any."""
        return None


class LiveSource(Source[Event]):
    """``GET /v1/events``: the runtime's live events, of every agent or of one."""

    marks_reconnects = True

    def __init__(self, agent: Optional[str], types: Optional[list[str]]) -> None:
        self.path = "/v1/events"
        self.params = [
            (name, value)
            for name, value in (("agent", agent), ("types", ",".join(types or [])))
            if value
        ]

    def parse(self, sse: ServerSentEvent) -> Event:
        return parse_event(_json_object(sse))


class LogSource(Source[LoggedEvent]):
    """``GET /v1/agents/{id}/events`` as a stream: the agent's durable event log, each event with
    its seq as the SSE id.

    The server starts "from now" when it is given no position, and from the log's first event
    only when the log is empty. So the stream never relies on that: a stream asked to start from
    now first reads the newest seq and starts after it; and one that loses its connection before
    its first event, having started on an empty log, reads back what was logged meanwhile from
    the JSON listing before it reconnects.
    """

    def __init__(self, agent: str, from_now: bool) -> None:
        self.path = _endpoints.agent_path(agent, "/events")
        self._agent = agent
        self._from_now = from_now

    def parse(self, sse: ServerSentEvent) -> LoggedEvent:
        try:
            return LoggedEvent.from_json(_json_object(sse))
        except (KeyError, TypeError) as e:
            raise ProtocolError(f"cannot read a logged event: {e}") from e

    def opening_call(
        self, last_event_id: Optional[str], started: bool
    ) -> Optional[Call[list[LoggedEvent]]]:
        if not started:
            return _endpoints.event_log(self._agent, 1) if self._from_now else None
        if last_event_id is None:
            return _endpoints.event_log(self._agent, CATCH_UP_LIMIT)
        return None


def _json_object(sse: ServerSentEvent) -> dict[str, Any]:
    try:
        data = json.loads(sse.data)
    except ValueError as e:
        raise ProtocolError(f"an event's data is not JSON: {sse.data[:200]!r}") from e
    if not isinstance(data, dict):
        raise ProtocolError(f"an event's data is not a JSON object: {sse.data[:200]!r}")
    return data


class StreamState(Generic[T]):
    """Everything about one event stream but its I/O: the position to resume from, the events
    decoded but not yet yielded, the reconnection bookkeeping."""

    def __init__(
        self,
        source: Source[T],
        last_event_id: Optional[str],
        reconnect: Reconnect,
        idle_timeout: float,
    ) -> None:
        self.source = source
        self.last_event_id = last_event_id
        self.reconnect = reconnect
        self.idle_timeout = idle_timeout
        self.reconnects = 0
        self.pending: deque[Any] = deque()
        self._decoder = SSEDecoder()
        self._started = False

    def headers(self) -> dict[str, str]:
        """The headers of the next connection."""
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = self.last_event_id
        return headers

    def opening_call(self) -> Optional[Call[Any]]:
        """The JSON read to make (and give to :meth:`read`) before the next connection."""
        return self.source.opening_call(self.last_event_id, self._started)

    def read(self, listed: list[LoggedEvent]) -> None:
        """Takes the answer of :meth:`opening_call`: at the start, the position to start after;
        on a reconnection, the events the stream missed, to be yielded first."""
        ordered = sorted(listed, key=lambda e: e.seq)
        if self._started:
            self.pending.extend(ordered)
        if ordered:
            self.last_event_id = str(ordered[-1].seq)

    def connected(self, attempts: int) -> None:
        """A connection is open, after `attempts` attempts (0 for the first connection)."""
        self._decoder = SSEDecoder()
        self._started = True
        if attempts:
            self.reconnects += 1
            if self.source.marks_reconnects:
                resumed = self.last_event_id is not None
                self.pending.append(Reconnected(resumed=resumed, attempts=attempts))

    def feed(self, line: str) -> Optional[T]:
        """Takes one line of the stream; returns the event it completes, if any."""
        sse = self._decoder.feed(line)
        if sse is None:
            return None
        if sse.id is not None:
            self.last_event_id = sse.id
        return self.source.parse(sse)
