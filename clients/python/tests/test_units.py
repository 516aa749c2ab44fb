"""The parts that need no server: SSE decoding, lenient parsing, error mapping, the reconnection
policy, query parameters."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import httpx
import pytest

import somna
from somna._endpoints import journal
from somna._errors import error_from_response
from somna._events import parse_event
from somna._sse import ServerSentEvent, SSEDecoder


def decode(text: str) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events = (decoder.feed(line) for line in text.splitlines())
    return [e for e in events if e is not None]


def test_sse_decoding() -> None:
    stream = (
        ": connected\n\n"
        'data: {"a": 1}\n\n'
        ": keep-alive\n\n"
        "id: 12\nevent: log\ndata: first\ndata:second\nretry: 5\n\n"
        "data: no id of its own\n\n"
        "id\ndata: id reset\n\n"
        "data: unfinished"
    )
    assert decode(stream) == [
        ServerSentEvent('{"a": 1}'),
        ServerSentEvent("first\nsecond", "log", "12"),
        ServerSentEvent("no id of its own", "message", "12"),  # the last id carries over
        ServerSentEvent("id reset", "message", None),
    ]


def test_unknown_fields_and_types_are_tolerated() -> None:
    summary = somna.AgentSummary.from_json(
        {
            "id": "smith",
            "state": "dreaming",  # a state a newer server added
            "usage": 0,
            "usage_pct": 0,
            "prompt_tokens": 1,
            "max_context_tokens": 2,
            "history_len": 3,
            "archive_len": 4,
            "compaction_count": 5,
            "needs_reply": False,
            "pending_tools": 0,
            "mood": "cheerful",  # a field a newer server added
        }
    )
    assert summary.state == "dreaming" and summary.usage == 0.0 and summary.last_compaction is None
    assert isinstance(summary.usage, float)
    event = parse_event({"type": "agent_dreamt", "agent": "smith", "at": 1})
    assert event == somna.UnknownEvent(
        "agent_dreamt", {"type": "agent_dreamt", "agent": "smith", "at": 1}
    )
    # A known type that lost a field reads as unknown rather than breaking the stream.
    assert isinstance(parse_event({"type": "agent_replied", "agent": "smith"}), somna.UnknownEvent)


def test_typed_events() -> None:
    call = parse_event(
        {
            "at": 5,
            "type": "tool_call_requested",
            "agent": "keeper",
            "call_id": "call_1",
            "name": "open_door",
            "arguments": '{"door": "north"}',
            "new_field": True,
        }
    )
    assert isinstance(call, somna.ToolCallRequested)
    assert call.arguments_json() == {"door": "north"}
    assert parse_event({"type": "lagged", "missed": 37}) == somna.Lagged(missed=37)
    assert parse_event({"type": "sleep_started", "agent": "a", "at": 1}) == somna.SleepStarted(
        agent="a", at=1, tired=False
    )


def test_one_of_fields_pick_their_shape() -> None:
    skipped = somna.CompactionOutcome.from_json(
        {"outcome": "skipped", "reason": {"reason": "batch_too_small", "body": 1, "min": 5}}
    )
    assert skipped.reason == somna.SkipReason(reason="batch_too_small", body=1, min=5)
    failed = somna.CompactionOutcome.from_json({"outcome": "failed", "reason": "boom", "usage": 1})
    assert failed.reason == "boom" and failed.usage == 1.0 and not failed.done


def test_missing_required_fields_are_protocol_errors() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/healthz":
            return httpx.Response(200, json={"status": "ok"})
        return httpx.Response(200, text="<html>not json</html>")

    http = httpx.Client(transport=httpx.MockTransport(answer))
    with somna.Client("http://somna.test", http_client=http) as client:
        with pytest.raises(somna.ProtocolError, match="version"):
            client.health()
        with pytest.raises(somna.ProtocolError):
            client.agents()
    assert not http.is_closed  # a client it was given stays open
    http.close()


@pytest.mark.parametrize(
    "status, code, cls",
    [
        (400, "bad_request", somna.InvalidRequest),
        (401, "unauthorized", somna.Unauthorized),
        (404, "unknown_agent", somna.NotFound),
        (409, "agent_exists", somna.Conflict),
        (409, "busy", somna.Busy),
        (410, "agent_retired", somna.Gone),
        (413, "input_too_large", somna.InvalidRequest),
        (422, "invalid_config", somna.InvalidRequest),
        (500, "internal", somna.ServerError),
        (503, "shutting_down", somna.Unavailable),
        (405, "method_not_allowed", somna.ApiError),
    ],
)
def test_error_mapping(status: int, code: str, cls: type) -> None:
    body = {"error": {"code": code, "message": "m", "fields": [{"field": "f", "message": "g"}]}}
    error = error_from_response(status, httpx.Response(status, json=body).content)
    assert type(error) is cls and error.status == status and error.code == code
    assert isinstance(error, somna.ApiError) and isinstance(error, somna.SomnaError)
    assert str(error) == f"{status} {code}: m"
    assert error.fields == [somna.FieldError(field="f", message="g")]


def test_an_error_that_is_not_the_apis() -> None:
    error = error_from_response(502, b"<html>Bad Gateway</html>")
    assert type(error) is somna.ServerError and error.code == "http_error"
    assert error.message == "<html>Bad Gateway</html>" and error.fields == []


def test_reconnect_policy() -> None:
    policy = somna.Reconnect(max_attempts=3, initial_delay=0.1, max_delay=0.3)
    assert [policy.gives_up(n) for n in (1, 3, 4)] == [False, False, True]
    for attempt, step in [(1, 0.1), (2, 0.2), (3, 0.3), (60, 0.3)]:
        assert step / 2 <= policy.delay(attempt) <= step
    assert somna.Reconnect(max_attempts=0).gives_up(1)
    assert not somna.Reconnect(max_attempts=None).gives_up(10**6)


def test_journal_parameters() -> None:
    call = journal(
        "smith",
        source_type=None,
        tags="a",
        min_importance=None,
        since=timedelta(minutes=90),
        until=datetime(2026, 11, 21, 11, 0, tzinfo=timezone(timedelta(hours=1))),
        limit=None,
        cursor=0,
    )
    assert list(call.params) == [
        ("tag", "a"),
        ("since", "5400000ms"),
        ("until", "2026-11-21T10:00:00.000Z"),
        ("cursor", "0"),
    ]
    with pytest.raises(ValueError):
        journal(
            "smith",
            source_type=None,
            tags=None,
            min_importance=None,
            since=timedelta(seconds=-1),
            until=None,
            limit=None,
            cursor=None,
        )


def test_agent_ids_are_escaped_in_paths() -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return httpx.Response(404, json={"error": {"code": "unknown_agent", "message": "m"}})

    with httpx.Client(transport=httpx.MockTransport(answer)) as http:
        client = somna.Client("http://somna.test/", http_client=http)
        with pytest.raises(somna.NotFound):
            client.status("a/b?c")
    assert seen == ["/v1/agents/a%2Fb%3Fc"]
