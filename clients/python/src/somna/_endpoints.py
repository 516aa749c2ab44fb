"""Every endpoint of the API as a :class:`~somna._base.Call`: its method, path, parameters, body
and how its answer is read. Both clients send these; only how they send differs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any, Optional, Union
from urllib.parse import quote

from ._base import Call
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
    _Events,
    _Facts,
    _IdAndConfig,
    _TokenList,
)

#: A journal time bound: a duration meaning "that long ago", a time, or the API's own text
#: (``"1d"``, ``"90m"``, ``"2026-11-21T10:00:00Z"``).
TimeBound = Union[str, timedelta, datetime]


def agent_path(agent: str, rest: str = "") -> str:
    """The path of an agent's resource."""
    return f"/v1/agents/{quote(agent, safe='')}{rest}"


def _params(*pairs: tuple[str, Any]) -> list[tuple[str, str]]:
    """The query parameters that have a value (``None`` leaves a parameter out)."""
    out = []
    for name, value in pairs:
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append((name, str(value)))
    return out


def _time_bound(value: TimeBound) -> str:
    """A journal time bound as the API reads it (a naive datetime is taken as UTC)."""
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise ValueError(f"a time bound duration cannot be negative: {value}")
        return f"{int(value / timedelta(milliseconds=1))}ms"
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return (
            value.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        )
    return value


def _config(data: Any) -> AgentConfig:
    return _IdAndConfig.from_json(data).config


def health() -> Call[Health]:
    return Call("GET", "/healthz", Health.from_json)


def openapi() -> Call[Any]:
    return Call("GET", "/v1/openapi.json", lambda document: document)


def agents(include_retired: bool) -> Call[AgentList]:
    params = _params(("include_retired", True if include_retired else None))
    return Call("GET", "/v1/agents", AgentList.from_json, params)


def create_agent(agent: str, config: Any) -> Call[AgentConfig]:
    return Call("POST", "/v1/agents", _config, json={"id": agent, "config": dict(config)})


def status(agent: str) -> Call[AgentStatus]:
    return Call("GET", agent_path(agent), AgentStatus.from_json)


def retire(agent: str) -> Call[Retired]:
    return Call("DELETE", agent_path(agent), Retired.from_json)


def config(agent: str) -> Call[AgentConfig]:
    return Call("GET", agent_path(agent, "/config"), _config)


def configure(agent: str, changes: Any) -> Call[AgentConfig]:
    return Call("PATCH", agent_path(agent, "/config"), _config, json=dict(changes))


def _input(agent: str, body: Any) -> Call[Accepted]:
    return Call("POST", agent_path(agent, "/input"), Accepted.from_json, json=body)


def send(agent: str, content: str, name: Optional[str]) -> Call[Accepted]:
    body = {"type": "user", "content": content}
    if name is not None:
        body["name"] = name
    return _input(agent, body)


def observe(agent: str, content: str) -> Call[Accepted]:
    return _input(agent, {"type": "observation", "content": content})


def tool_result(agent: str, call_id: str, result: Any) -> Call[Accepted]:
    content = result if isinstance(result, str) else json.dumps(result)
    return _input(agent, {"type": "tool_result", "call_id": call_id, "content": content})


def compact(agent: str, force: bool) -> Call[CompactionOutcome]:
    return Call(
        "POST", agent_path(agent, "/compact"), CompactionOutcome.from_json, json={"force": force}
    )


def sleep(agent: str) -> Call[SleepResult]:
    return Call("POST", agent_path(agent, "/sleep"), SleepResult.from_json)


def uncompact(agent: str, summary_seq: int) -> Call[Restored]:
    return Call(
        "POST",
        agent_path(agent, "/uncompact"),
        Restored.from_json,
        json={"summary_seq": summary_seq},
    )


def history(agent: str, from_seq: Optional[int], limit: Optional[int]) -> Call[MessagePage]:
    params = _params(("from_seq", from_seq), ("limit", limit))
    return Call("GET", agent_path(agent, "/history"), MessagePage.from_json, params)


def archive(agent: str, from_seq: Optional[int], limit: Optional[int]) -> Call[MessagePage]:
    params = _params(("from_seq", from_seq), ("limit", limit))
    return Call("GET", agent_path(agent, "/archive"), MessagePage.from_json, params)


def search(agent: str, query: str, limit: Optional[int]) -> Call[SearchHits]:
    params = _params(("q", query), ("limit", limit))
    return Call("GET", agent_path(agent, "/archive/search"), SearchHits.from_json, params)


def journal(
    agent: str,
    *,
    source_type: Optional[str],
    tags: Union[str, Sequence[str], None],
    min_importance: Optional[int],
    since: Optional[TimeBound],
    until: Optional[TimeBound],
    limit: Optional[int],
    cursor: Optional[int],
) -> Call[JournalPage]:
    tag_list: Iterable[str] = [tags] if isinstance(tags, str) else (tags or [])
    params = _params(
        ("source_type", source_type),
        *(("tag", tag) for tag in tag_list),
        ("min_importance", min_importance),
        ("since", None if since is None else _time_bound(since)),
        ("until", None if until is None else _time_bound(until)),
        ("limit", limit),
        ("cursor", cursor),
    )
    return Call("GET", agent_path(agent, "/journal"), JournalPage.from_json, params)


def prompt(agent: str, input: Optional[str]) -> Call[PromptView]:
    params = _params(("input", input))
    return Call("GET", agent_path(agent, "/prompt"), PromptView.from_json, params)


def facts(agent: str) -> Call[list[Fact]]:
    return Call("GET", agent_path(agent, "/facts"), lambda data: _Facts.from_json(data).facts)


def event_log(agent: str, limit: Optional[int]) -> Call[list[LoggedEvent]]:
    return Call(
        "GET",
        agent_path(agent, "/events"),
        lambda data: _Events.from_json(data).events,
        _params(("limit", limit)),
    )


def tokens() -> Call[list[TokenInfo]]:
    return Call("GET", "/v1/tokens", lambda data: _TokenList.from_json(data).tokens)


def create_token(name: str, agents: str, access: str) -> Call[CreatedToken]:
    body = {"name": name, "agents": agents, "access": access}
    return Call("POST", "/v1/tokens", CreatedToken.from_json, json=body)


def revoke_token(name: str) -> Call[None]:
    return Call("DELETE", f"/v1/tokens/{quote(name, safe='')}", lambda _: None)
