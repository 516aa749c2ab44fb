"""Event streams across a server restart: the server is killed (SIGKILL: connections reset, no
goodbye) and started again on the same data directory and port while a stream is open."""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any

import pytest

import somna
from conftest import Server, fill, persist, wait_for

# Quick retries: the restarted server is back within a second or two.
RETRY = somna.Reconnect(max_attempts=50, initial_delay=0.05, max_delay=0.5)


def compact(client: somna.Client, agent: str) -> somna.CompactionOutcome:
    """A forced compaction over fresh history (one `compaction` record in the log)."""
    fill(client, agent)
    outcome = client.compact(agent, force=True)
    assert outcome.done, outcome
    return outcome


def test_live_events_reconnect_after_a_restart(own_server: Server) -> None:
    with own_server.client() as client:
        stream = client.events(agent="smith", reconnect=RETRY)
        received: queue.Queue[Any] = queue.Queue()

        def read() -> None:
            try:
                for event in stream:
                    received.put(event)
            except Exception as e:  # handed to the test's thread
                received.put(e)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def next_event() -> Any:
            item = received.get(timeout=30)
            if isinstance(item, Exception):
                raise item
            return item

        def reply_to(line: str) -> somna.AgentReplied:
            client.send("smith", line, name="Aldric")
            while True:
                event = next_event()
                if isinstance(event, somna.AgentReplied):
                    return event

        before = reply_to("Good morning! I'm Aldric, the miller.")
        persist(client, "smith")
        own_server.restart()
        wait_for(lambda: stream.reconnects == 1, "the stream to reconnect")
        # The client resumes with the id of the last event it got; the new process says it is
        # one, then replays its own events and goes on live.
        marker = next_event()
        assert isinstance(marker, somna.Reconnected) and marker.resumed
        assert isinstance(next_event(), somna.ServerRestarted)
        after = reply_to("I'm back. Is the forge still hot?")
        assert after.seq > before.seq
        stream.close()
        reader.join(timeout=10)
        assert not reader.is_alive()

        texts = [m.content for m in client.history("smith")]
        assert before.text in texts and after.text in texts


def test_event_log_resumes_after_a_restart(own_server: Server) -> None:
    with own_server.client() as client:
        client.create_agent("wren")
        first = compact(client, "wren")
        stream = client.follow_event_log("wren", reconnect=RETRY)
        assert stream.last_event_id == "0"  # from now on: after the newest event
        second = compact(client, "wren")
        got: list[somna.LoggedEvent] = [next(stream)]
        assert got[0].event.type == "compaction"
        assert got[0].event.summary_seq == second.summary_seq
        assert stream.last_event_id == str(got[0].seq)

        persist(client, "wren")
        own_server.restart()
        # Logged while the stream is down: nobody reads it until the compactions are done.
        compact(client, "wren")
        restored = client.uncompact("wren", first.summary_seq or 0)
        assert restored.restored
        logged = sorted(client.event_log("wren"), key=lambda e: e.seq)
        expected = [e for e in logged if e.seq > got[0].seq]
        assert [e.event.type for e in expected] == ["compaction", "uncompaction"]

        got += [next(stream) for _ in expected]
        assert stream.reconnects == 1
        assert got[1:] == expected  # nothing lost, nothing repeated, in order
        # And it goes on with what comes next.
        assert client.sleep("wren").outcome == "slept"
        following = next(stream)
        assert following.seq == expected[-1].seq + 1 and following.event.type == "sleep"
        stream.close()


def test_event_log_dropped_before_its_first_event_loses_nothing(own_server: Server) -> None:
    # A new agent's log is empty: the stream starts from its first event, and has no id to
    # resume after when its connection drops before that event. Asked without one, the server
    # would start from the newest event; the client reads back what was logged meanwhile.
    with own_server.client() as client:
        client.create_agent("pell")
        stream = client.follow_event_log("pell", reconnect=RETRY, idle_timeout=10)
        assert stream.last_event_id is None
        own_server.restart()
        compact(client, "pell")
        compact(client, "pell")
        got = [next(stream), next(stream)]
        assert [e.seq for e in got] == [0, 1]
        compact(client, "pell")
        assert next(stream).seq == 2
        stream.close()


def test_a_stream_gives_up_when_the_server_stays_down(own_server: Server) -> None:
    with own_server.client() as client:
        retry = somna.Reconnect(max_attempts=2, initial_delay=0.01, max_delay=0.02)
        stream = client.events(reconnect=retry)
        own_server.stop()
        with pytest.raises(somna.TransportError):
            next(stream)


def test_async_streams_resume_after_a_restart(own_server: Server) -> None:
    async def main() -> None:
        async with own_server.async_client() as client:
            await client.create_agent("oswin")
            async with client.follow_event_log("oswin", reconnect=RETRY) as log:
                async with client.events(agent="oswin", reconnect=RETRY) as live:
                    own_server.restart()
                    # Reading notices the drop and reconnects.
                    assert isinstance(await live.__anext__(), somna.Reconnected)
                    await client.send("oswin", "Hello again!", name="Aldric")
                    async for event in live:
                        if isinstance(event, somna.AgentReplied):
                            break
                    assert live.reconnects == 1
                for i in range(8):
                    await client.observe("oswin", f"The river rose {i + 1} feet at the mill {i}.")
                outcome = await client.compact("oswin", force=True)
                assert outcome.done
                logged = await log.__anext__()
                assert logged.seq == 0 and logged.event.type == "compaction"
                assert log.reconnects == 1

    asyncio.run(main())
