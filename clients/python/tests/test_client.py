"""Every method of the blocking client against a real server."""

from __future__ import annotations

import pickle
import socket
import threading
from datetime import datetime, timedelta, timezone
from typing import Callable, Optional

import pytest

import somna
from conftest import Server, fill, settle, wait_for


def test_health_needs_no_token(server: Server) -> None:
    with somna.Client(server.url, token="") as client:
        health = client.health()
    assert health.status == "ok"
    assert health.version


def test_agents_lists_the_config_agents(client: somna.Client, agent: str) -> None:
    listed = client.agents()
    assert {"smith", agent} <= set(listed.ids)
    assert len(listed) == len(listed.agents) and listed.retired is None
    smith = next(a for a in listed if a.id == "smith")
    assert isinstance(smith, somna.AgentSummary)
    assert smith.max_context_tokens == 2000 and 0 <= smith.usage <= 1


def test_create_status_config_configure(client: somna.Client, new_id: Callable[[], str]) -> None:
    agent = new_id()
    created = client.create_agent(
        agent, persona="You are Pell, the ferryman.", compaction={"preserve_messages": 6}
    )
    assert created.id == agent and created.persona == "You are Pell, the ferryman."
    assert created.compaction.preserve_messages == 6 and created.model == "builtin"

    status = client.status(agent)
    assert status.id == agent and status.state in ("idle", "stepping")
    assert status.history_len == 0 and status.pending_tools == [] and not status.reply_owed
    assert status.config == created

    changed = client.configure(agent, compaction={"sleep_threshold": 0.6}, tick_every="30ms")
    assert changed.compaction.sleep_threshold == 0.6 and changed.tick_every == "30ms"
    assert changed.compaction.preserve_messages == 6  # merged over the earlier change
    assert client.config(agent) == changed


def test_send_and_hear_the_reply(client: somna.Client, agent: str) -> None:
    with client.events(agent=agent) as events:
        accepted = client.send(agent, "Good morning! I'm Aldric, the miller.", name="Aldric")
        assert accepted == somna.Accepted(accepted=True)
        reply = next(e for e in events if isinstance(e, somna.AgentReplied))
    assert isinstance(reply, somna.AgentReplied)
    assert reply.agent == agent and reply.text and reply.seq >= 1
    assert events.reconnects == 0

    history = client.history(agent)
    assert [m.role for m in history][:1] == ["user"]
    said = history.messages[0]
    assert said.content == "Good morning! I'm Aldric, the miller." and said.name == "Aldric"
    assert said.kind is not None and said.kind.type == "normal" and not said.is_summary
    assert any(m.seq == reply.seq and m.content == reply.text for m in history)


def test_events_filters_by_type(client: somna.Client, agent: str) -> None:
    with client.events(agent=agent, types=["agent_replied"]) as events:
        client.observe(agent, "A cart rolls into the yard.")
        client.compact(agent, force=True)  # compaction events, which the filter drops
        client.send(agent, "Hello there.", name="Aldric")
        first = next(iter(events))
    assert isinstance(first, somna.AgentReplied) and first.agent == agent


def test_events_of_every_agent(client: somna.Client, agent: str) -> None:
    with client.events() as events:
        client.send(agent, "Is the forge hot today?", name="Aldric")
        reply = next(e for e in events if isinstance(e, somna.AgentReplied) and e.agent == agent)
    assert reply.text


def test_observe_and_tool_result(client: somna.Client, agent: str) -> None:
    assert client.observe(agent, "Snow starts to fall.").accepted
    history = client.history(agent)
    assert "Snow starts to fall." in history.messages[-1].content
    with pytest.raises(somna.NotFound) as caught:
        client.tool_result(agent, "call_that_never_was", {"opened": True})
    assert caught.value.code == "unknown_tool_call" and caught.value.status == 404


def test_prompt_preview(client: somna.Client, agent: str) -> None:
    fill(client, agent, 3)
    view = client.prompt(agent, input="Did Jory pay for the plough?")
    assert view.input == "Did Jory pay for the plough?" and view.model == "builtin"
    assert view.window_tokens == 2000 and view.total_tokens <= view.budget_tokens
    assert view.parts.reply_reserve == 512 and view.parts.live_history > 0
    assert view.messages[0].part == "system" and view.messages[-1].content.endswith("plough?")
    assert len(client.history(agent)) == 3  # nothing was sent
    assert client.prompt(agent).input == ""


def test_history_and_archive_pages(client: somna.Client, agent: str) -> None:
    fill(client, agent, 5)
    first = client.history(agent, limit=2)
    assert [m.seq for m in first] == [0, 1] and first.next_from_seq == 2
    rest = client.history(agent, from_seq=first.next_from_seq, limit=1000)
    assert [m.seq for m in rest] == [2, 3, 4] and rest.next_from_seq is None
    assert len(client.archive(agent)) == 0


def test_compact_search_uncompact(client: somna.Client, agent: str) -> None:
    fill(client, agent, what="Aldric bought a horseshoe")
    settle(client, agent)
    # Not forced: only at the sleep threshold, which this short history is far below.
    skipped = client.compact(agent)
    assert skipped.outcome == "skipped" and not skipped.done
    assert isinstance(skipped.reason, somna.SkipReason)
    assert skipped.reason.reason == "below_threshold" and skipped.reason.threshold == 0.7

    done = client.compact(agent, force=True)
    assert done.done and done.trigger == "manual" and done.compacted and done.summary_seq == 0
    assert done.tokens_before is not None and done.tokens_after is not None

    history = client.history(agent)
    summary = history.messages[0]
    assert summary.is_summary and summary.kind is not None
    assert summary.kind.covers_from_seq == 0 and summary.kind.generation == 1
    archived = client.archive(agent, limit=3)
    assert [m.seq for m in archived] == [0, 1, 2] and archived.next_from_seq == 3
    hits = client.search(agent, "horseshoe", limit=2)
    assert hits.query == "horseshoe" and len(hits) == 2
    assert all("horseshoe" in m.content for m in hits)

    synthesis = client.journal(agent, source_type="compaction", tags="synthesis")
    assert len(synthesis) == 1 and synthesis.entries[0].covers == (0, done.compacted - 1)

    restored = client.uncompact(agent, done.summary_seq)
    assert restored == somna.Restored(outcome="restored", summary_seq=0, restored=done.compacted)
    assert not client.history(agent).messages[0].is_summary
    log = client.event_log(agent)
    assert [e.event.type for e in log] == ["uncompaction", "compaction"]  # newest first
    assert log[1].event.summary_seq == 0 and log[1].event.covers == (0, done.compacted - 1)
    assert log[0].seq > log[1].seq and log[0].by is None
    assert [e.seq for e in client.event_log(agent, limit=1)] == [log[0].seq]

    with pytest.raises(somna.NotFound) as caught:
        client.uncompact(agent, 999)
    assert caught.value.code == "unknown_summary"


def test_sleep_and_facts(client: somna.Client, agent: str) -> None:
    client.send(agent, "My sister Marta was married yesterday at the chapel.", name="Aldric")
    settle(client, agent)
    client.observe(agent, "The miller Aldric paid 12 silver coins for a horseshoe.")
    with client.events(agent=agent) as events:
        slept = client.sleep(agent)
        kinds = []
        for event in events:
            kinds.append(type(event))
            if isinstance(event, somna.SleepCompleted):
                break
    assert slept.outcome == "slept" and slept.error is None
    assert slept.compaction is not None and slept.compaction.outcome == "skipped"
    assert kinds == [
        somna.SleepStarted,
        somna.ConsolidationCompleted,
        somna.CompactionStarted,
        somna.CompactionSkipped,
        somna.SleepCompleted,
    ]

    facts = client.facts(agent)
    assert facts and all(isinstance(f, somna.Fact) and f.source_entry_ids for f in facts)
    assert any("Marta" in f.text for f in facts)
    assert client.event_log(agent)[0].event.type == "sleep"
    marta = [e for e in client.journal(agent, min_importance=3) if "Marta" in e.content]
    assert marta and marta[0].consolidated and marta[0].importance >= 3


def test_journal_filters_and_pages(client: somna.Client, agent: str) -> None:
    fill(client, agent, 5)

    def journaled() -> Optional[somna.JournalPage]:
        # Observations are journaled at the agent's next tick, after the input was accepted.
        page = client.journal(agent)
        return page if len(page) == 5 else None

    everything = wait_for(journaled, "the observations to be journaled")
    ids = [e.id for e in everything]
    assert ids == sorted(ids, reverse=True)  # newest first
    assert all(e.source_type == "observation" for e in everything)

    pages: list[int] = []
    cursor = None
    while True:
        page = client.journal(agent, limit=2, cursor=cursor)
        pages.extend(e.id for e in page)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == ids

    assert [e.id for e in client.journal(agent, source_type="observation", limit=1)] == ids[:1]
    assert len(client.journal(agent, source_type="reflection")) == 0
    assert len(client.journal(agent, since=timedelta(days=1))) == len(ids)
    assert len(client.journal(agent, since="1d", until=timedelta(0))) == len(ids)
    future = datetime.now(timezone.utc) + timedelta(days=1)
    assert len(client.journal(agent, since=future)) == 0
    assert len(client.journal(agent, until=datetime(2000, 1, 1))) == 0
    assert len(client.journal(agent, tags=["no-such-tag", "nor-this"])) == 0
    assert len(client.journal(agent, min_importance=10)) == 0


def test_retire(client: somna.Client, agent: str) -> None:
    client.observe(agent, "The bell rings once.")
    assert client.retire(agent) == somna.Retired(id=agent, retired=True)
    assert agent not in client.agents().ids
    assert agent in (client.agents(include_retired=True).retired or [])
    with pytest.raises(somna.Gone) as caught:
        client.status(agent)
    assert caught.value.code == "agent_retired" and caught.value.status == 410
    with pytest.raises(somna.Gone):
        client.send(agent, "Are you there?")
    # Its data stays readable, and its id is never reused.
    assert len(client.history(agent)) == 1
    with pytest.raises(somna.Conflict) as conflict:
        client.create_agent(agent)
    assert conflict.value.code == "agent_exists"


def test_errors_carry_the_api_codes(client: somna.Client, agent: str) -> None:
    with pytest.raises(somna.NotFound) as not_found:
        client.status("nobody-by-that-name")
    assert not_found.value.code == "unknown_agent" and not_found.value.status == 404
    assert "nobody-by-that-name" in not_found.value.message

    with pytest.raises(somna.Conflict) as exists:
        client.create_agent(agent)
    assert exists.value.code == "agent_exists" and exists.value.status == 409
    assert not isinstance(exists.value, somna.Busy)

    with pytest.raises(somna.InvalidRequest) as bad_config:
        client.configure(agent, compaction={"emergency_threshold": 0.1})
    assert bad_config.value.code == "invalid_config" and bad_config.value.status == 422
    assert {f.field for f in bad_config.value.fields} == {"compaction.emergency_threshold"}

    with pytest.raises(somna.InvalidRequest) as bad_param:
        client.history(agent, limit=0)
    assert bad_param.value.code == "bad_request" and bad_param.value.status == 400
    assert bad_param.value.fields == [
        somna.FieldError(field="limit", message="must be between 1 and 1000, got 0")
    ]

    with pytest.raises(somna.InvalidRequest) as bad_id:
        client.create_agent("no spaces allowed")
    assert bad_id.value.code == "invalid_agent_id" and bad_id.value.status == 400

    with pytest.raises(somna.InvalidRequest) as empty:
        client.send(agent, "   ")
    assert empty.value.code == "invalid_input" and empty.value.fields[0].field == "content"

    with pytest.raises(somna.InvalidRequest) as blank_query:
        client.search(agent, " ")
    assert blank_query.value.code == "bad_request"

    with pytest.raises(somna.InvalidRequest) as bad_type:
        client.events(types=["no_such_event"])
    assert bad_type.value.code == "bad_request"

    with pytest.raises(somna.NotFound) as no_log:
        client.follow_event_log("nobody-by-that-name")
    assert no_log.value.code == "unknown_agent"

    copy = pickle.loads(pickle.dumps(not_found.value))
    assert type(copy) is somna.NotFound and copy.code == "unknown_agent"


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_unauthorized(server: Server, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOMNA_API_TOKEN", raising=False)
    with somna.Client(server.url, token=token) as client:
        with pytest.raises(somna.Unauthorized) as caught:
            client.agents()
        assert caught.value.code == "unauthorized" and caught.value.status == 401
        with pytest.raises(somna.Unauthorized):
            client.events()


def test_scoped_tokens(client: somna.Client, server: Server, new_id: Callable[[], str]) -> None:
    mine, other = new_id(), new_id()
    prefix = mine  # ids of this test are unique; the token reaches `mine` and nothing else
    client.create_agent(mine)
    client.create_agent(other)
    made = client.create_token(f"tok-{mine}"[:64], prefix, "read")
    assert made.token.startswith("somna_") and made.access == "read" and made.agents == prefix
    assert made.name in [t.name for t in client.tokens()]
    with somna.Client(server.url, token=made.token) as scoped:
        assert scoped.agents().ids == [mine]
        assert scoped.status(mine).id == mine
        with pytest.raises(somna.Forbidden) as caught:
            scoped.status(other)
        assert caught.value.code == "forbidden" and caught.value.status == 403
        with pytest.raises(somna.Forbidden):
            scoped.send(mine, "hello")
        with pytest.raises(somna.Forbidden):
            scoped.tokens()
        client.revoke_token(made.name)
        with pytest.raises(somna.Unauthorized):
            scoped.status(mine)
    with pytest.raises(somna.NotFound) as gone:
        client.revoke_token(made.name)
    assert gone.value.code == "unknown_token"
    with pytest.raises(somna.InvalidRequest):
        client.create_token("bad name", prefix)


def test_url_and_token_from_the_environment(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOMNA_SERVER", server.url + "/")
    monkeypatch.setenv("SOMNA_API_TOKEN", server.token)
    with somna.Client() as client:
        assert client.base_url == server.url
        assert "smith" in client.agents().ids


def test_openapi(client: somna.Client) -> None:
    document = client.openapi()
    assert document["openapi"].startswith("3.") and "/v1/agents" in document["paths"]


def test_connection_refused_is_a_transport_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing listens there
    with somna.Client(f"http://127.0.0.1:{port}", token="t") as client:
        with pytest.raises(somna.TransportError) as caught:
            client.health()
        assert not isinstance(caught.value, somna.Timeout)
        with pytest.raises(somna.TransportError):
            client.events()


def test_idle_stream_times_out(client: somna.Client, agent: str) -> None:
    # A stream on which nothing comes within the idle timeout counts as dropped; with no
    # reconnection allowed, that is a Timeout.
    stream = client.events(agent=agent, idle_timeout=0.2, reconnect=somna.Reconnect(max_attempts=0))
    with stream, pytest.raises(somna.Timeout):
        next(stream)


def test_close_ends_iteration_from_another_thread(client: somna.Client, agent: str) -> None:
    stream = client.events(agent=agent)
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.extend(stream))
    reader.start()
    stream.close()
    reader.join(timeout=10)
    assert not reader.is_alive() and got == []
