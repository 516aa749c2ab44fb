"""The asyncio client against a real server (each test runs its coroutine with asyncio.run)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, Callable

import pytest

import somna
from conftest import TOOLS, Server


def run(server: Server, test: Callable[[somna.AsyncClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with server.async_client() as client:
            return await test(client)

    return asyncio.run(main())


async def reply_to(client: somna.AsyncClient, agent: str, line: str) -> somna.AgentReplied:
    async with client.events(agent=agent, types=["agent_replied"]) as events:
        await client.send(agent, line, name="Aldric")
        async for event in events:
            assert isinstance(event, somna.AgentReplied)
            return event
    raise AssertionError("the stream ended")


def test_lifecycle_and_reads(server: Server, new_id: Callable[[], str]) -> None:
    agent = new_id()

    async def test(client: somna.AsyncClient) -> None:
        assert (await client.health()).status == "ok"
        created = await client.create_agent(agent, persona="You are Tam, the tanner.")
        assert created.id == agent
        assert agent in (await client.agents()).ids
        assert (await client.status(agent)).config == created
        changed = await client.configure(agent, compaction={"preserve_messages": 5})
        assert changed.compaction.preserve_messages == 5
        assert await client.config(agent) == changed

        reply = await reply_to(client, agent, "Good day! Do you tan deer hides?")
        history = await client.history(agent)
        assert history.messages[0].content == "Good day! Do you tan deer hides?"
        assert history.messages[-1].content == reply.text

        for i, tool in enumerate(TOOLS):
            await client.observe(agent, f"A pedlar sold a {tool} for {i + 2} pennies at dusk.")
        compacted = await client.compact(agent, force=True)
        assert compacted.done and compacted.summary_seq == 0
        assert len(await client.archive(agent)) == compacted.compacted
        assert (await client.search(agent, "pedlar", limit=1)).hits
        journal = await client.journal(agent, source_type="compaction", tags=["synthesis"])
        assert len(journal) == 1
        assert [e.event.type for e in await client.event_log(agent)] == ["compaction"]
        restored = await client.uncompact(agent, 0)
        assert restored.restored == compacted.compacted
        assert (await client.prompt(agent, input="And the hides?")).input == "And the hides?"

        slept = await client.sleep(agent)
        assert slept.outcome == "slept"
        assert all(isinstance(f, somna.Fact) for f in await client.facts(agent))
        assert (await client.retire(agent)).retired
        assert agent in ((await client.agents(include_retired=True)).retired or [])

    run(server, test)


def test_errors(server: Server, new_id: Callable[[], str]) -> None:
    async def test(client: somna.AsyncClient) -> None:
        with pytest.raises(somna.NotFound) as not_found:
            await client.status("nobody-by-that-name")
        assert not_found.value.code == "unknown_agent"
        with pytest.raises(somna.Conflict) as exists:
            await client.create_agent("smith")
        assert exists.value.code == "agent_exists"
        with pytest.raises(somna.InvalidRequest) as invalid:
            await client.journal("smith", min_importance=11)
        assert invalid.value.code == "bad_request"
        assert [f.field for f in invalid.value.fields] == ["min_importance"]
        with pytest.raises(somna.InvalidRequest):
            async with client.events(types=["nope"]):
                pass

    run(server, test)

    async def wrong_token() -> None:
        async with somna.AsyncClient(server.url, token="wrong") as client:
            await client.agents()

    with pytest.raises(somna.Unauthorized) as caught:
        asyncio.run(wrong_token())
    assert caught.value.code == "unauthorized"


def test_follow_the_event_log(server: Server, new_id: Callable[[], str]) -> None:
    agent = new_id()

    async def test(client: somna.AsyncClient) -> list[int]:
        await client.create_agent(agent)
        async with client.follow_event_log(agent) as log:
            seqs = []
            for round in range(2):
                for i, tool in enumerate(TOOLS):
                    await client.observe(agent, f"Round {round}: a {tool} went for {i} pence.")
                assert (await client.compact(agent, force=True)).done
                seqs.append((await log.__anext__()).seq)
        # A host that kept the last seq it processed resumes after it.
        async with client.follow_event_log(agent, after=seqs[0]) as again:
            async for event in again:
                seqs.append(event.seq)
                break
        return seqs

    assert run(server, test) == [0, 1, 1]


def test_aclose_ends_iteration_in_another_task(server: Server) -> None:
    async def test(client: somna.AsyncClient) -> list[somna.Event]:
        stream = client.events(agent="smith")
        await stream.__aenter__()

        async def read() -> list[somna.Event]:
            return [event async for event in stream]

        reader = asyncio.ensure_future(read())
        await asyncio.sleep(0)  # the reader starts (whether it blocks yet or not, it must end)
        await stream.aclose()
        return await asyncio.wait_for(reader, timeout=10)

    assert run(server, test) == []
