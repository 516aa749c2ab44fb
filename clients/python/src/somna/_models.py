"""The typed results of the API: one frozen dataclass per schema of the server's OpenAPI document.

Each model names the schema it mirrors (`_schema`), and its fields are that schema's properties:
a property the schema requires is a field without a default, any other has one (`None`, `False` or
an empty list). A schema that is one of several shapes (`oneOf`, e.g. a compaction's outcome) is one
flat model: its discriminator (`outcome`, `type`, `reason`) and the union of the shapes' properties,
required only where every shape requires them. The test suite holds these fields to the document a
real server serves, so that the two cannot drift apart silently.

Parsing is lenient the way a client of a newer server must be: keys this client does not know are
ignored; only a missing required key is an error (:class:`~somna.ProtocolError`).

Timestamps (`at`, `created_at`, `deadline`, ...) are milliseconds since the Unix epoch, as on the
wire; durations (`tick_every`, ...) are humantime strings (`"1s"`, `"1h 30m"`).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional, TypeVar, Union

__all__ = [
    "Accepted",
    "AgentConfig",
    "AgentList",
    "AgentStatus",
    "AgentSummary",
    "ChatUsage",
    "CompactionConfig",
    "CompactionOutcome",
    "CompactionReport",
    "EventRecord",
    "ExcerptView",
    "Fact",
    "FieldError",
    "GroundingCounts",
    "Health",
    "JournalEntry",
    "JournalPage",
    "LoggedEvent",
    "MemoryConfig",
    "Message",
    "MessageKind",
    "MessagePage",
    "PendingTool",
    "PromptMessage",
    "PromptParts",
    "PromptView",
    "Recalled",
    "Restored",
    "Retired",
    "SearchHits",
    "SectionCaps",
    "SkipReason",
    "SleepResult",
    "ToolCall",
    "ToolSpec",
    "Writer",
]

M = TypeVar("M", bound="Model")

_NONE_TYPE = type(None)


class Model:
    """Base of the models: parsing from the JSON the server sends."""

    # The name of the OpenAPI schema the model mirrors (components/schemas).
    _schema: ClassVar[str]
    # The model's field types, resolved once (get_type_hints on first use).
    _hints: ClassVar[dict[str, Any]]

    @classmethod
    def from_json(cls: type[M], data: Mapping[str, Any]) -> M:
        """Builds the model from a decoded JSON object; unknown keys are ignored.

        Raises ``KeyError`` for a missing required key and ``TypeError`` for a value of the wrong
        shape; the clients turn both into :class:`~somna.ProtocolError`.
        """
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
        hints = cls.__dict__.get("_hints")
        if hints is None:
            hints = typing.get_type_hints(cls)
            cls._hints = hints
        values = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            if f.name in data:
                values[f.name] = _decode(hints[f.name], data[f.name])
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise KeyError(f"{cls.__name__}: the server's answer has no {f.name!r}")
        return cls(**values)


def _decode(tp: Any, value: Any) -> Any:
    """`value` (decoded JSON) as the type `tp` of a model's field."""
    if value is None or tp is Any:
        return value
    origin = typing.get_origin(tp)
    if origin is Union:
        options = [a for a in typing.get_args(tp) if a is not _NONE_TYPE]
        if len(options) == 1:
            return _decode(options[0], value)
        # A field that is one of several shapes (a skip reason object or a failure's text):
        # the JSON type picks the shape.
        for option in options:
            if isinstance(option, type) and issubclass(option, Model):
                if isinstance(value, Mapping):
                    return option.from_json(value)
            elif isinstance(value, typing.get_origin(option) or option):
                return value
        raise TypeError(f"expected one of {options}, got {value!r}")
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise TypeError(f"expected a JSON array, got {value!r}")
        return [_decode(item, v) for v in value]
    if origin is tuple:
        items = typing.get_args(tp)
        if not isinstance(value, list) or len(value) != len(items):
            raise TypeError(f"expected a JSON array of {len(items)}, got {value!r}")
        return tuple(_decode(t, v) for t, v in zip(items, value))
    if isinstance(tp, type) and issubclass(tp, Model):
        return tp.from_json(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


# ---------------------------------------------------------------------------------------------
# Errors, health


@dataclass(frozen=True)
class FieldError(Model):
    """One value of a request that was at fault (in an error's ``fields``)."""

    _schema = "FieldError"

    field: str
    """Where the value is: its path in the JSON body (``config.compaction.emergency_threshold``) or
    the query parameter's name."""
    message: str
    """What is wrong with it."""


@dataclass(frozen=True)
class Health(Model):
    """The answer of ``GET /healthz``."""

    _schema = "Health"

    status: str
    """Always ``"ok"``."""
    version: str
    """The server's version."""


# ---------------------------------------------------------------------------------------------
# Config


@dataclass(frozen=True)
class SectionCaps(Model):
    """Caps, in tokens, of each section of a compaction summary."""

    _schema = "SectionCaps"

    topic_arc: Optional[int] = None
    decisions: Optional[int] = None
    pending: Optional[int] = None
    user_facts: Optional[int] = None
    artifacts: Optional[int] = None


@dataclass(frozen=True)
class CompactionConfig(Model):
    """An agent's resolved compaction settings (docs/configuration.md explains each)."""

    _schema = "CompactionConfig"

    enabled: bool
    sleep_threshold: float
    emergency_threshold: float
    max_context_tokens: int
    preserve_messages: int
    preserve_ratio: float
    head_size: int
    min_compact_batch: int
    compact_model: str
    compact_prompt: str
    summary_max_tokens: int
    sections: SectionCaps
    summarizer_context_tokens: int
    warn_after_compactions: int
    mask_after_messages: int
    mask_exempt_tools: list[str]
    extraction: str
    max_input_tokens: int
    max_reply_tokens: int
    working_share: float


@dataclass(frozen=True)
class MemoryConfig(Model):
    """An agent's resolved memory and sleep settings."""

    _schema = "MemoryConfig"

    min_importance: int
    importance: str
    reflection_threshold: int
    working_facts: int
    working_archive: int


@dataclass(frozen=True)
class ToolSpec(Model):
    """A tool the host program defines; the agent's calls to it come as
    :class:`~somna.ToolCallRequested` events."""

    _schema = "ToolSpec"

    name: str
    description: Optional[str] = None
    parameters: Optional[str] = None
    """The JSON Schema of the arguments, as JSON text."""


@dataclass(frozen=True)
class AgentConfig(Model):
    """An agent's fully resolved config: ``[defaults]``, its ``[[agents]]`` entry and the run-time
    changes, merged."""

    _schema = "AgentConfig"

    id: str
    persona: str
    model: str
    tick_every: str
    sleep_every: str
    sleep_jitter: str
    tool_timeout: str
    compaction: CompactionConfig
    memory: MemoryConfig
    tools: list[ToolSpec]


@dataclass(frozen=True)
class _IdAndConfig(Model):
    """The answer of create, config and configure: the id and the config (which holds it too)."""

    _schema = "IdAndConfig"

    id: str
    config: AgentConfig


# ---------------------------------------------------------------------------------------------
# Agents


@dataclass(frozen=True)
class ChatUsage(Model):
    """Prompt tokens the LLM server reported for chat calls, and how many it served from its
    cache."""

    _schema = "ChatUsage"

    calls: int
    prompt_tokens: int
    cached_prompt_tokens: Optional[int] = None
    """``None`` while the server never said."""


@dataclass(frozen=True)
class GroundingCounts(Model):
    """What the grounding check did with the items a model wrote into memory."""

    _schema = "GroundingCounts"

    kept: int
    repaired: int
    dropped: int


@dataclass(frozen=True)
class CalibrationStatus(Model):
    """How an agent's usage is calibrated against the LLM server's token counts."""

    _schema = "CalibrationStatus"

    learned: float
    """The ratio of the server's prompt-token counts to Somna's estimate, from its reports."""
    applied: float
    """The factor usage is multiplied by (at most 1.3 until enough reports agree)."""
    samples: int
    held_back: bool
    """``learned`` is above what is applied, for want of corroboration."""


@dataclass(frozen=True)
class PendingTool(Model):
    """A host tool call the agent waits on."""

    _schema = "PendingTool"

    call_id: str
    name: str
    deadline: int
    """When the model gets an error result instead (ms since the epoch)."""


@dataclass(frozen=True)
class AgentSummary(Model):
    """One agent of :meth:`Client.agents() <somna.Client.agents>`."""

    _schema = "AgentSummary"

    id: str
    state: str
    """``idle``, ``stepping``, ``compacting``, ``sleeping`` or ``waiting_for_tools``."""
    usage: float
    """The prompt's share of ``max_context_tokens``, 0 to 1."""
    usage_pct: float
    prompt_tokens: int
    max_context_tokens: int
    history_len: int
    archive_len: int
    compaction_count: int
    needs_reply: bool
    pending_tools: int
    """How many host tool calls the agent waits on."""
    last_compaction: Optional[int] = None


@dataclass(frozen=True)
class AgentList(Model):
    """The hosted agents; iterating over it gives their summaries."""

    _schema = "AgentList"

    agents: list[AgentSummary]
    unavailable: list[str] = field(default_factory=list)
    """Agents whose actor did not answer (overloaded or stopping)."""
    retired: Optional[list[str]] = None
    """The retired agents' ids, when asked for (``include_retired=True``)."""

    def __iter__(self) -> Iterator[AgentSummary]:
        return iter(self.agents)

    def __len__(self) -> int:
        return len(self.agents)

    @property
    def ids(self) -> list[str]:
        """The hosted agents' ids."""
        return [a.id for a in self.agents]


@dataclass(frozen=True)
class AgentStatus(Model):
    """An agent's full status: usage, counts, state and config."""

    _schema = "StatusBody"

    id: str
    state: str
    """``idle``, ``stepping``, ``compacting``, ``sleeping`` or ``waiting_for_tools``."""
    usage: float
    """Prompt usage, 0 to 1."""
    usage_pct: float
    prompt_tokens: int
    max_context_tokens: int
    history_len: int
    archive_len: int
    compaction_count: int
    needs_reply: bool
    """A user spoke and the agent has not replied yet."""
    pending_tools: list[PendingTool]
    config: AgentConfig
    host: Optional[str] = None
    """On a cluster, the node that runs the agent; ``None`` outside a cluster."""
    last_compaction: Optional[int] = None
    reply_owed: bool = False
    """A chat turn ended without the reply it owed (the LLM failed); cleared by the next reply."""
    chat_usage: Optional[ChatUsage] = None
    grounding: Optional[GroundingCounts] = None
    calibration: Optional[CalibrationStatus] = None


@dataclass(frozen=True)
class Retired(Model):
    """The answer of a retirement."""

    _schema = "Retired"

    id: str
    retired: bool


@dataclass(frozen=True)
class Accepted(Model):
    """The answer of an accepted input: it is in the agent's history (on disk with
    ``durable_acks``); the agent acts on it at its next tick."""

    _schema = "Accepted"

    accepted: bool


# ---------------------------------------------------------------------------------------------
# History and archive


@dataclass(frozen=True)
class ToolCall(Model):
    """One function call an assistant message requests."""

    _schema = "ToolCall"

    id: str
    name: str
    arguments: str
    """The arguments as the JSON text the model wrote (verbatim: it may be invalid JSON)."""


@dataclass(frozen=True)
class MessageKind(Model):
    """What kind of entry a message is: ``normal``, a compaction ``summary`` (with what it covers)
    or an old tool output ``masked`` by a placeholder."""

    _schema = "MessageKind"

    type: str
    covers_from_seq: Optional[int] = None
    covers_through_seq: Optional[int] = None
    compacted_count: Optional[int] = None
    original_tokens: Optional[int] = None
    summary_tokens: Optional[int] = None
    generation: Optional[int] = None
    compacted_at: Optional[int] = None


@dataclass(frozen=True)
class Message(Model):
    """One message of an agent's history or archive."""

    _schema = "Message"

    seq: int
    """Its position in the history; a summary takes the seq of the first message it covers."""
    role: str
    """``system``, ``user``, ``assistant`` or ``tool``."""
    content: str
    created_at: int
    tokens: int
    name: Optional[str] = None
    """Who spoke (``world`` for observations)."""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: Optional[str] = None
    kind: Optional[MessageKind] = None

    @property
    def is_summary(self) -> bool:
        """The message is a compaction summary standing in for archived messages."""
        return self.kind is not None and self.kind.type == "summary"


@dataclass(frozen=True)
class MessagePage(Model):
    """A page of history or archive messages, in seq order."""

    _schema = "MessagePage"

    messages: list[Message]
    next_from_seq: Optional[int] = None
    """Pass it as ``from_seq`` for the next page; ``None`` on the last page."""

    def __iter__(self) -> Iterator[Message]:
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)


@dataclass(frozen=True)
class SearchHits(Model):
    """The answer of an archive search: the archived messages that match, best first."""

    _schema = "SearchHits"

    query: str
    hits: list[Message]

    def __iter__(self) -> Iterator[Message]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)


# ---------------------------------------------------------------------------------------------
# Journal and facts


@dataclass(frozen=True)
class JournalEntry(Model):
    """One journal entry."""

    _schema = "JournalEntry"

    id: int
    at: int
    content: str
    source_type: str
    """``observation``, ``note``, ``reflection``, ``compaction`` or ``extraction``."""
    importance: int
    """1 (trivial) to 10 (life-changing)."""
    tags: list[str] = field(default_factory=list)
    consolidated: bool = False
    """Sleep has distilled it into memory facts."""
    covers: Optional[tuple[int, int]] = None
    """The seq range (inclusive) of history a compaction or extraction entry came from."""
    source_seqs: list[int] = field(default_factory=list)
    source_entries: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class JournalPage(Model):
    """A page of journal entries, newest first."""

    _schema = "JournalPage"

    entries: list[JournalEntry]
    next_cursor: Optional[int] = None
    """Pass it as ``cursor`` for the next (older) page; ``None`` on the last page."""

    def __iter__(self) -> Iterator[JournalEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class Fact(Model):
    """A durable memory fact that sleep distilled from the journal, with its provenance."""

    _schema = "Fact"

    id: int
    text: str
    source_entry_ids: list[int]
    """The journal entries it was distilled from."""
    at: int
    source_seqs: list[int] = field(default_factory=list)
    """The history turns behind it."""


@dataclass(frozen=True)
class _Facts(Model):
    """The answer of ``GET /v1/agents/{id}/facts``."""

    _schema = "Facts"

    facts: list[Fact]


# ---------------------------------------------------------------------------------------------
# Scoped API tokens


@dataclass(frozen=True)
class TokenInfo(Model):
    """A scoped API token as listed: never its secret."""

    _schema = "TokenInfo"

    name: str
    agents: str
    """The agent-id prefix: the token reaches exactly the agents whose id starts with it."""
    access: str
    """``read`` (reads and the event stream) or ``read_write`` (also commands)."""
    created_at: int


@dataclass(frozen=True)
class _TokenList(Model):
    """The answer of ``GET /v1/tokens``."""

    _schema = "TokenList"

    tokens: list[TokenInfo]


@dataclass(frozen=True)
class CreatedToken(TokenInfo):
    """A token just made: what :class:`TokenInfo` lists, and ``token``, its secret, shown this
    once (the server keeps only its SHA-256)."""

    _schema = "CreatedToken"

    token: str


# ---------------------------------------------------------------------------------------------
# Compaction, sleep, undo


@dataclass(frozen=True)
class SkipReason(Model):
    """Why a compaction was skipped: ``reason`` is ``disabled``, ``below_threshold``
    (``threshold``), ``empty_history``, ``within_preserve_window`` (``head``, ``tail``) or
    ``batch_too_small`` (``body``, ``min``)."""

    _schema = "SkipReason"

    reason: str
    threshold: Optional[float] = None
    head: Optional[int] = None
    tail: Optional[int] = None
    body: Optional[int] = None
    min: Optional[int] = None


@dataclass(frozen=True)
class CompactionReport(Model):
    """What a committed compaction did."""

    _schema = "CompactionReport"

    trigger: str
    """``sleep``, ``emergency`` or ``manual``."""
    method: str
    """``llm``, ``extractive``, ``archive_marker`` or ``mask_only``."""
    compacted: int
    preserved: int
    tokens_before: int
    tokens_after: int
    reduction_pct: float
    usage_after: float
    generation: int
    summary_seq: Optional[int] = None
    fallback_reason: Optional[str] = None
    warning: Optional[str] = None
    grounding: Optional[GroundingCounts] = None
    stuck: Optional[str] = None
    """An emergency compaction that left the prompt at or above the emergency threshold: why,
    in numbers."""


@dataclass(frozen=True)
class CompactionOutcome(Model):
    """The outcome of a compaction: ``done`` (the report's fields are set), ``skipped``
    (``reason`` is a :class:`SkipReason`), ``failed`` (``reason`` is the error's text; nothing
    changed) or ``stalled`` (it would have saved under 5%: not committed)."""

    _schema = "CompactionOutcome"

    outcome: str
    reason: Union[SkipReason, str, None] = None
    usage: Optional[float] = None
    trigger: Optional[str] = None
    method: Optional[str] = None
    compacted: Optional[int] = None
    preserved: Optional[int] = None
    tokens_before: Optional[int] = None
    tokens_after: Optional[int] = None
    reduction_pct: Optional[float] = None
    usage_after: Optional[float] = None
    summary_seq: Optional[int] = None
    """The seq of the summary a ``done`` compaction wrote: what :meth:`~somna.Client.uncompact`
    takes."""
    generation: Optional[int] = None
    fallback_reason: Optional[str] = None
    warning: Optional[str] = None
    grounding: Optional[GroundingCounts] = None
    stuck: Optional[str] = None

    @property
    def done(self) -> bool:
        """A summary (or fallback) was committed."""
        return self.outcome == "done"


@dataclass(frozen=True)
class SleepResult(Model):
    """What a sleep did: ``outcome`` is ``slept``, with its compaction's outcome (if it got that
    far) and the error that stopped it, if any."""

    _schema = "SleepResult"

    outcome: str
    compaction: Optional[CompactionOutcome] = None
    error: Optional[str] = None
    reflected: bool = False
    """The sleep wrote a reflection."""


@dataclass(frozen=True)
class Restored(Model):
    """The answer of an undone compaction."""

    _schema = "Restored"

    outcome: str
    """Always ``restored``."""
    summary_seq: int
    restored: int
    """Messages put back into history."""


# ---------------------------------------------------------------------------------------------
# The durable event log


@dataclass(frozen=True)
class Writer(Model):
    """The cluster node that wrote a logged event, and the epoch of its lease on the shard."""

    _schema = "Writer"

    node: str
    epoch: int


@dataclass(frozen=True)
class EventRecord(Model):
    """One record of an agent's durable event log. ``type`` is ``compaction``, ``uncompaction``,
    ``masking``, ``compaction_failed``, ``note``, ``sleep`` or ``emergency_fallback``; the fields
    each type sets are in docs/api.md (the others stay ``None`` or empty)."""

    _schema = "EventRecord"

    type: str
    at: int
    trigger: Optional[str] = None
    method: Optional[str] = None
    summary_seq: Optional[int] = None
    covers: Optional[tuple[int, int]] = None
    compacted: Optional[int] = None
    preserved: Optional[int] = None
    tokens_before: Optional[int] = None
    tokens_after: Optional[int] = None
    usage_before: Optional[float] = None
    """A compaction's usage before and after (0–1), calibrated as the thresholds compare it."""
    usage_after: Optional[float] = None
    synthesis_entry: Optional[int] = None
    generation: Optional[int] = None
    grounding: Optional[GroundingCounts] = None
    summary: Optional[str] = None
    restored: Optional[int] = None
    masked: Optional[int] = None
    reason: Optional[str] = None
    text: Optional[str] = None
    due: Optional[int] = None
    next: Optional[int] = None
    entries: Optional[int] = None
    facts: Optional[int] = None
    reflections: Optional[int] = None
    failures: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    stuck: Optional[str] = None


@dataclass(frozen=True)
class LoggedEvent(Model):
    """A record of the durable event log and its per-agent sequence number (also its SSE id)."""

    _schema = "LoggedEvent"

    seq: int
    event: EventRecord
    by: Optional[Writer] = None
    """On a cluster, the node that wrote it; ``None`` outside a cluster."""


@dataclass(frozen=True)
class _Events(Model):
    """The answer of ``GET /v1/agents/{id}/events``."""

    _schema = "Events"

    events: list[LoggedEvent]


# ---------------------------------------------------------------------------------------------
# What the agent sees


@dataclass(frozen=True)
class PromptParts(Model):
    """The context window's tokens by part; they add up to the window."""

    _schema = "PromptParts"

    persona: int
    summary: int
    working_context: int
    """Memory facts and archive excerpts recalled for the input."""
    live_history: int
    reply_reserve: int
    free: int


@dataclass(frozen=True)
class PromptMessage(Model):
    """One message of a prompt, with the part of the prompt it is (``system``,
    ``working_context`` or ``live_history``)."""

    _schema = "PromptMessage"

    part: str
    role: str
    content: str
    tokens: int
    name: Optional[str] = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: Optional[str] = None


@dataclass(frozen=True)
class ExcerptView(Model):
    """A run of archived turns around search hits, recalled into the working context."""

    _schema = "ExcerptView"

    turns: list[int]
    hits: list[int]
    """Those of the turns that are search hits (the rest are their neighbours)."""


@dataclass(frozen=True)
class Recalled(Model):
    """What retrieval recalled for an input: memory facts and archive excerpts."""

    _schema = "Recalled"

    facts: list[Fact]
    excerpts: list[ExcerptView]


@dataclass(frozen=True)
class PromptView(Model):
    """The prompt an agent's next LLM call would receive for an input (nothing is sent)."""

    _schema = "PromptView"

    model: str
    input: str
    window_tokens: int
    budget_tokens: int
    """The most tokens the prompt may carry: the window less the reply reserve."""
    total_tokens: int
    parts: PromptParts
    dropped_turns: int
    """The oldest live turns left out to fit the budget."""
    messages: list[PromptMessage]
    recalled: Recalled
