"""The client against the OpenAPI document a real server serves (GET /v1/openapi.json), so that
the two cannot drift apart silently:

- every result dataclass has exactly the properties of the schema it models, required ones
  without a default and the others with one;
- every request the client sends is a documented operation, with documented query parameters
  and body keys, and every documented operation (but the Prometheus metrics) has a method;
- the live event classes cover exactly the event types the server knows, and the events a real
  server sends carry no field their classes lack, and every field they require.
"""

from __future__ import annotations

import dataclasses
import json
import re
from contextlib import suppress
from typing import Any, Callable

import httpx
import pytest

import somna
from conftest import Server, fill, settle
from somna import _events, _models
from somna._sse import SSEDecoder

Shape = tuple[set[str], set[str]]  # (properties, required)


@pytest.fixture(scope="module")
def document(server: Server) -> dict[str, Any]:
    with server.client() as client:
        return client.openapi()  # type: ignore[no-any-return]


def resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = document["components"]["schemas"][name]
    return schema


def shape(document: dict[str, Any], schema: dict[str, Any]) -> Shape:
    """The properties of an object schema and the required ones. Parts of an `allOf` add up; a
    `oneOf` has the properties of any of its shapes, and requires what every shape requires."""
    schema = resolve(document, schema)
    if "allOf" in schema:
        parts = [shape(document, part) for part in schema["allOf"]]
        return set().union(*(p for p, _ in parts)), set().union(*(r for _, r in parts))
    if "oneOf" in schema:
        parts = [shape(document, part) for part in schema["oneOf"]]
        return set().union(*(p for p, _ in parts)), set.intersection(*(r for _, r in parts))
    return set(schema.get("properties", {})), set(schema.get("required", []))


def model_classes() -> list[type]:
    return [
        cls
        for cls in vars(_models).values()
        if isinstance(cls, type) and dataclasses.is_dataclass(cls) and "_schema" in vars(cls)
    ]


def test_every_public_result_is_checked() -> None:
    public = {
        name
        for name in somna.__all__
        if isinstance(getattr(somna, name), type)
        and issubclass(getattr(somna, name), _models.Model)
        and not issubclass(getattr(somna, name), somna.Event)
    }
    assert public <= {cls.__name__ for cls in model_classes()}


@pytest.mark.parametrize("cls", model_classes(), ids=lambda cls: cls.__name__)
def test_models_match_their_schemas(document: dict[str, Any], cls: Any) -> None:
    schemas = document["components"]["schemas"]
    assert cls._schema in schemas, f"the document has no schema {cls._schema}"
    properties, required = shape(document, schemas[cls._schema])
    fields = {f.name: f for f in dataclasses.fields(cls)}
    without_default = {
        name
        for name, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    assert set(fields) == properties, (
        f"{cls.__name__} vs schema {cls._schema}: "
        f"missing {sorted(properties - set(fields))}, extra {sorted(set(fields) - properties)}"
    )
    assert without_default == required, (
        f"{cls.__name__} vs schema {cls._schema}: required in the schema but with a default: "
        f"{sorted(required - without_default)}; optional in the schema but without one: "
        f"{sorted(without_default - required)}"
    )


def sent_requests() -> list[httpx.Request]:
    """Every request the client's methods send, with every optional argument given."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500, json={"error": {"code": "internal", "message": "recorded"}})

    http = httpx.Client(transport=httpx.MockTransport(answer))
    client = somna.Client("http://somna.test", token="t", http_client=http)
    calls: list[Callable[[], object]] = [
        client.health,
        client.openapi,
        lambda: client.agents(include_retired=True),
        lambda: client.create_agent("a", persona="p", compaction={"enabled": True}),
        lambda: client.status("a"),
        lambda: client.config("a"),
        lambda: client.configure("a", persona="q"),
        lambda: client.retire("a"),
        lambda: client.send("a", "hi", name="n"),
        lambda: client.observe("a", "rain"),
        lambda: client.tool_result("a", "call", {"ok": True}),
        lambda: client.compact("a", force=True),
        lambda: client.sleep("a"),
        lambda: client.uncompact("a", 0),
        lambda: client.history("a", from_seq=1, limit=2),
        lambda: client.archive("a", from_seq=1, limit=2),
        lambda: client.search("a", "q", limit=3),
        lambda: client.journal(
            "a",
            source_type="note",
            tags=["x", "y"],
            min_importance=3,
            since="1d",
            until="1h",
            limit=4,
            cursor=5,
        ),
        lambda: client.facts("a"),
        lambda: client.prompt("a", input="hello"),
        lambda: client.event_log("a", limit=6),
        lambda: client.events(agent="a", types=["agent_replied"]),
        lambda: client.follow_event_log("a", after=7),
        client.tokens,
        lambda: client.create_token("t", "a-", "read_write"),
        lambda: client.revoke_token("t"),
    ]
    for call in calls:
        with suppress(somna.ServerError):
            call()
    return sent


def operation(document: dict[str, Any], request: httpx.Request) -> tuple[str, dict[str, Any]]:
    """The documented operation `request` is an instance of."""
    for template, operations in document["paths"].items():
        if re.fullmatch(re.sub(r"\{[^/]+\}", "[^/]+", template), request.url.path):
            method = request.method.lower()
            assert method in operations, f"{request.method} {template} is not documented"
            return template, operations[method]
    raise AssertionError(f"{request.method} {request.url.path} is not a documented path")


def test_requests_match_the_documented_operations(document: dict[str, Any]) -> None:
    covered = set()
    for request in sent_requests():
        template, op = operation(document, request)
        covered.add((request.method, template))
        documented = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
        sent = set(request.url.params.keys())
        assert sent <= documented, f"{request.method} {template}: undocumented {sent - documented}"
        if request.content:
            body = httpx.Response(200, content=request.content).json()
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            properties, required = shape(document, schema)
            assert set(body) <= properties, f"{request.method} {template}: {set(body)}"
            assert required <= set(body), f"{request.method} {template}: needs {required}"
    every = {
        (method.upper(), template)
        for template, operations in document["paths"].items()
        for method in operations
    }
    assert every - covered == {("GET", "/metrics")}


def test_event_classes_cover_the_servers_event_types(server: Server) -> None:
    # The document has no schema for the stream's events (it is `text/event-stream`), but an
    # unknown `types` filter is refused with the list of every type the server knows.
    with server.client() as client, pytest.raises(somna.InvalidRequest) as refused:
        client.events(types=["no_such_type"])
    listed = re.search(r"expected any of: ([a-z_, ]+)\)", refused.value.message)
    assert listed, f"the refusal no longer lists the event types: {refused.value.message}"
    server_types = {t.strip() for t in listed.group(1).split(",")}
    # The stream's own notices are not runtime events.
    assert server_types == set(_events.EVENT_TYPES) - {"lagged", "server_restarted"}


def test_live_events_have_the_fields_of_their_classes(
    server: Server, new_id: Callable[[], str]
) -> None:
    # The stream read raw (the client's parsing drops what it does not know): every key of each
    # event must be a field of its class, and every field without a default must be there.
    agent = new_id()
    headers = {"Authorization": f"Bearer {server.token}"}
    url = f"{server.url}/v1/events"
    with (
        server.client() as client,
        httpx.stream("GET", url, params={"agent": agent}, headers=headers, timeout=30) as response,
    ):
        client.create_agent(agent)
        client.send(agent, "My sister Marta was married yesterday.", name="Aldric")
        settle(client, agent)  # replied before what follows
        fill(client, agent)
        client.compact(agent)  # skipped: below the threshold
        done = client.compact(agent, force=True)
        client.uncompact(agent, done.summary_seq or 0)
        client.sleep(agent)
        decoder = SSEDecoder()
        seen: dict[str, set[str]] = {}
        for line in response.iter_lines():
            sse = decoder.feed(line)
            if sse is None:
                continue
            data = json.loads(sse.data)
            cls = _events.EVENT_TYPES[data["type"]]
            fields = dataclasses.fields(cls)
            names = {f.name for f in fields}
            required = {f.name for f in fields if f.default is dataclasses.MISSING}
            assert set(data) - {"type"} <= names, f"{data['type']}: {set(data) - names}"
            assert required <= set(data), f"{data['type']}: no {required - set(data)}"
            seen.setdefault(data["type"], set()).update(data)
            if data["type"] == "sleep_completed":
                break
    assert set(seen) >= {
        "agent_replied",
        "compaction_started",
        "compaction_skipped",
        "compaction_completed",
        "uncompacted",
        "sleep_started",
        "consolidation_completed",
        "sleep_completed",
    }
