"""The live events of ``GET /v1/events``, as :meth:`Client.events() <somna.Client.events>` yields
them: one class per event ``type`` of docs/api.md, :class:`Lagged` when the server dropped events
for this subscriber, :class:`Reconnected` when the client had to reconnect, and
:class:`UnknownEvent` for a type this client does not know (from a newer server).

Every agent event has ``agent`` and ``at`` (ms since the epoch). Dispatch on the class::

    for event in stream:
        if isinstance(event, somna.AgentReplied):
            print(event.agent, "says", event.text)
        elif isinstance(event, somna.ToolCallRequested):
            result = run_tool(event.name, event.arguments_json())
            client.tool_result(event.agent, event.call_id, result)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, cast

from ._models import ChatUsage, CompactionReport, GroundingCounts, Model

__all__ = [
    "AgentError",
    "AgentReplied",
    "AgentWarning",
    "CompactionCompleted",
    "CompactionFailed",
    "CompactionSkipped",
    "CompactionStarted",
    "ConsolidationCompleted",
    "EmergencyStuck",
    "EmergencyTriggered",
    "Event",
    "Lagged",
    "Reconnected",
    "ReplyTruncated",
    "SleepCompleted",
    "SleepStarted",
    "ToolCallRequested",
    "ToolCallTimedOut",
    "ToolRoundsExhausted",
    "TurnFailed",
    "Uncompacted",
    "UnknownEvent",
]


class Event:
    """The base of everything the live event stream yields."""

    type: ClassVar[str]
    """The event's ``type`` on the wire."""


@dataclass(frozen=True)
class AgentReplied(Event, Model):
    """The agent appended a reply (``seq`` is its place in the history)."""

    type = "agent_replied"

    agent: str
    at: int
    seq: int
    text: str
    usage: Optional[ChatUsage] = None
    """What the LLM server reported for the turn's chat calls; ``None`` when it reported
    nothing."""


@dataclass(frozen=True)
class ToolCallRequested(Event, Model):
    """The agent called a host-defined tool; answer with
    :meth:`Client.tool_result() <somna.Client.tool_result>` and this ``call_id``."""

    type = "tool_call_requested"

    agent: str
    at: int
    call_id: str
    name: str
    arguments: str
    """The arguments as the JSON text the model wrote."""

    def arguments_json(self) -> Any:
        """The arguments decoded (``{}`` when empty); raises ``ValueError`` when the model wrote
        invalid JSON."""
        return json.loads(self.arguments) if self.arguments.strip() else {}


@dataclass(frozen=True)
class ToolCallTimedOut(Event, Model):
    """The host did not answer a tool call within the agent's ``tool_timeout``; the model was told
    so."""

    type = "tool_call_timed_out"

    agent: str
    at: int
    call_id: str
    name: str


@dataclass(frozen=True)
class CompactionStarted(Event, Model):
    """A compaction began (``trigger``: ``sleep``, ``emergency`` or ``manual``)."""

    type = "compaction_started"

    agent: str
    at: int
    trigger: str
    usage: float


@dataclass(frozen=True)
class CompactionCompleted(Event, Model):
    """A compaction committed."""

    type = "compaction_completed"

    agent: str
    at: int
    report: CompactionReport


@dataclass(frozen=True)
class CompactionSkipped(Event, Model):
    """A compaction had nothing to do."""

    type = "compaction_skipped"

    agent: str
    at: int
    trigger: str
    reason: str
    usage: float


@dataclass(frozen=True)
class CompactionFailed(Event, Model):
    """A compaction failed and changed nothing."""

    type = "compaction_failed"

    agent: str
    at: int
    trigger: str
    reason: str


@dataclass(frozen=True)
class EmergencyTriggered(Event, Model):
    """The prompt reached the emergency threshold: a compaction runs at once."""

    type = "emergency_triggered"

    agent: str
    at: int
    usage: float


@dataclass(frozen=True)
class EmergencyStuck(Event, Model):
    """An emergency compaction left usage at or above the threshold (sent once, until the
    history changes)."""

    type = "emergency_stuck"

    agent: str
    at: int
    usage: float
    threshold: float
    reason: str


@dataclass(frozen=True)
class Uncompacted(Event, Model):
    """A compaction was undone: ``restored`` originals are back in place of the summary."""

    type = "uncompacted"

    agent: str
    at: int
    summary_seq: int
    restored: int


@dataclass(frozen=True)
class SleepStarted(Event, Model):
    """A sleep began; ``tired`` when it was brought forward because the agent neared its
    emergency threshold."""

    type = "sleep_started"

    agent: str
    at: int
    tired: bool = False


@dataclass(frozen=True)
class ConsolidationCompleted(Event, Model):
    """Sleep distilled journal entries into memory facts and reflections."""

    type = "consolidation_completed"

    agent: str
    at: int
    entries: int
    facts: int
    reflections: int
    grounding: Optional[GroundingCounts] = None


@dataclass(frozen=True)
class SleepCompleted(Event, Model):
    """A sleep ended."""

    type = "sleep_completed"

    agent: str
    at: int


@dataclass(frozen=True)
class ReplyTruncated(Event, Model):
    """A reply ran past ``max_reply_tokens`` and was cut: ``tokens`` written, ``kept``
    appended."""

    type = "reply_truncated"

    agent: str
    at: int
    seq: int
    tokens: int
    kept: int


@dataclass(frozen=True)
class TurnFailed(Event, Model):
    """A chat turn gave up without a reply (the LLM failed); the reply stays owed."""

    type = "turn_failed"

    agent: str
    at: int
    attempts: int
    reason: str


@dataclass(frozen=True)
class ToolRoundsExhausted(Event, Model):
    """The turn used all its tool rounds without a final reply; the reply stays owed."""

    type = "tool_rounds_exhausted"

    agent: str
    at: int
    rounds: int


@dataclass(frozen=True)
class AgentWarning(Event, Model):
    """A warning about the agent (type ``warning``)."""

    type = "warning"

    agent: str
    at: int
    message: str


@dataclass(frozen=True)
class AgentError(Event, Model):
    """An LLM call or store operation failed during one of the agent's steps (type ``error``)."""

    type = "error"

    agent: str
    at: int
    message: str


@dataclass(frozen=True)
class Lagged(Event, Model):
    """This subscriber fell behind the server's event buffer and missed ``missed`` events; the
    stream goes on with the newest."""

    type = "lagged"

    missed: int


@dataclass(frozen=True)
class ServerRestarted(Event, Model):
    """The server restarted (or the stream reconnected to another node of a cluster) since the
    last event received: the events the old process sent after it, before it stopped, are
    missing; every event of the new process follows (of its newest 4,096). A host that waited
    for a reply should check the agent's history."""

    type = "server_restarted"


@dataclass(frozen=True)
class Reconnected(Event):
    """The client lost the stream's connection and opened a new one (not sent by the server).

    ``resumed`` is true when the client sent the last event id it received (``Last-Event-ID``):
    the server then replays what the stream missed (a :class:`Lagged` first if some of it is
    no longer held, a :class:`ServerRestarted` first if the server restarted meanwhile). It is
    false when no event had been received yet.
    """

    type: ClassVar[str] = "reconnected"
    resumed: bool
    attempts: int
    """The connection attempts it took."""


@dataclass(frozen=True)
class UnknownEvent(Event):
    """An event this client cannot read: a ``type`` it does not know (from a newer server), or a
    known type missing a field. ``data`` is the event's JSON."""

    type: str  # type: ignore[misc]
    data: dict[str, Any] = field(default_factory=dict)


#: The classes of the server's event types, by their ``type``.
EVENT_TYPES: dict[str, type[Model]] = {
    cls.type: cls
    for cls in (
        AgentReplied,
        ToolCallRequested,
        ToolCallTimedOut,
        CompactionStarted,
        CompactionCompleted,
        CompactionSkipped,
        CompactionFailed,
        EmergencyTriggered,
        EmergencyStuck,
        Uncompacted,
        SleepStarted,
        ConsolidationCompleted,
        SleepCompleted,
        ReplyTruncated,
        TurnFailed,
        ToolRoundsExhausted,
        AgentWarning,
        AgentError,
        Lagged,
        ServerRestarted,
    )
}


def parse_event(data: Mapping[str, Any]) -> Event:
    """The typed event of the JSON object `data`."""
    cls = EVENT_TYPES.get(str(data.get("type")))
    if cls is not None:
        try:
            return cast(Event, cls.from_json(data))
        except (KeyError, TypeError, ValueError):
            pass
    return UnknownEvent(type=str(data.get("type", "")), data=dict(data))
