#!/usr/bin/env python3
"""Drive Somna's HTTP API from a host program, with the standard library only (urllib).

A game server written in Python hosts an NPC: it creates the agent, listens to the agent's events
over Server-Sent Events, sends it what players say, answers the calls of a host-defined tool
(`open_door`), and queries the agent's journal.

Run a server first, for example the demo (offline; its model calls `open_door` when a player
mentions a door):

    cargo run -p somna-server --example serve
    python3 examples/python_host.py --url http://127.0.0.1:7878 --agent keeper

With a token (required when the server listens on a non-loopback address):

    SOMNA_API_TOKEN=s3cret python3 examples/python_host.py --url http://10.0.0.5:7878

Exit status 0 when every step worked; 1 with the API's error code otherwise.
"""

import argparse
import json
import os
import queue
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


class ApiError(Exception):
    """An error answer of the API: HTTP status, stable code, message, fields at fault."""

    def __init__(self, status, code, message, fields=None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields or []


class Somna:
    """A tiny client of the Somna API."""

    def __init__(self, base_url, token=None, timeout=30):
        self.base = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _request(self, method, path, body=None, params=None):
        url = self.base + path
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        return req

    def call(self, method, path, body=None, params=None):
        """Sends one request; returns the decoded JSON, raises ApiError on an error answer."""
        req = self._request(method, path, body, params)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            raw = e.read().decode("utf-8", "replace")
            try:
                err = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                raise ApiError(e.code, "http_error", raw or e.reason) from None
            raise ApiError(e.code, err["code"], err["message"], err.get("fields")) from None

    # The endpoints this host uses.
    def health(self):
        return self.call("GET", "/healthz")

    def create_agent(self, agent_id, config=None):
        return self.call("POST", "/v1/agents", {"id": agent_id, "config": config or {}})

    def status(self, agent_id):
        return self.call("GET", f"/v1/agents/{agent_id}")

    def configure(self, agent_id, changes):
        return self.call("PATCH", f"/v1/agents/{agent_id}/config", changes)

    def say(self, agent_id, text, name=None):
        body = {"type": "user", "content": text}
        if name:
            body["name"] = name
        return self.call("POST", f"/v1/agents/{agent_id}/input", body)

    def observe(self, agent_id, text):
        return self.call(
            "POST", f"/v1/agents/{agent_id}/input", {"type": "observation", "content": text}
        )

    def tool_result(self, agent_id, call_id, result):
        body = {"type": "tool_result", "call_id": call_id, "content": json.dumps(result)}
        return self.call("POST", f"/v1/agents/{agent_id}/input", body)

    def compact(self, agent_id, force=True):
        return self.call("POST", f"/v1/agents/{agent_id}/compact", {"force": force})

    def journal(self, agent_id, **params):
        return self.call("GET", f"/v1/agents/{agent_id}/journal", params=params)

    def history(self, agent_id, from_seq=0, limit=100):
        return self.call(
            "GET", f"/v1/agents/{agent_id}/history", params={"from_seq": from_seq, "limit": limit}
        )

    def events(self, agent_id=None):
        """Opens the SSE stream; returns a queue that receives each event (a dict) and a thread."""
        params = {"agent": agent_id} if agent_id else None
        req = self._request("GET", "/v1/events", params=params)
        req.add_header("Accept", "text/event-stream")
        resp = urllib.request.urlopen(req, timeout=self.timeout)
        events = queue.Queue()

        def pump():
            data = []
            try:
                for raw in resp:
                    line = raw.decode("utf-8").rstrip("\r\n")
                    if line.startswith(":"):
                        continue  # A comment: `connected` or `keep-alive`.
                    if line.startswith("data:"):
                        data.append(line[5:].lstrip())
                    elif line == "" and data:
                        events.put(json.loads("\n".join(data)))
                        data = []
            except Exception:  # noqa: BLE001 - closed by the main thread, or a broken connection.
                pass
            events.put(None)  # The stream ended.

        thread = threading.Thread(target=pump, daemon=True)
        thread.start()
        return events, resp


def open_door(arguments):
    """The host's implementation of the `open_door` tool."""
    door = arguments.get("door", "main")
    print(f"  [host] opening the {door} door")
    return {"opened": True, "door": door}


HOST_TOOLS = {"open_door": open_door}


def wait_for(events, wanted, deadline):
    """Returns the next event whose type is in `wanted`, or None at the deadline."""
    while time.monotonic() < deadline:
        try:
            event = events.get(timeout=max(0.05, deadline - time.monotonic()))
        except queue.Empty:
            return None
        if event is None:
            raise RuntimeError("the event stream ended")
        if event.get("type") == "lagged":
            print(f"  [host] missed {event['missed']} events (lagging)")
        if event.get("type") in wanted:
            return event
    return None


def converse(api, events, agent, text, name, timeout):
    """Says `text` and handles events until the agent replies, answering host tool calls."""
    print(f"{name}: {text}")
    api.say(agent, text, name=name)
    deadline = time.monotonic() + timeout
    tool_calls = 0
    while True:
        event = wait_for(events, {"agent_replied", "tool_call_requested", "error"}, deadline)
        if event is None:
            raise RuntimeError("no reply in time")
        if event["type"] == "error":
            print(f"  [agent error] {event['message']}")
            continue
        if event["type"] == "tool_call_requested":
            tool_calls += 1
            handler = HOST_TOOLS.get(event["name"])
            args = json.loads(event["arguments"] or "{}")
            print(f"  [tool call] {event['name']}({args}) id={event['call_id']}")
            result = handler(args) if handler else {"error": f"no tool {event['name']}"}
            api.tool_result(agent, event["call_id"], result)
            continue
        print(f"{agent}: {event['text']}")
        return tool_calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:7878")
    parser.add_argument("--token", default=os.environ.get("SOMNA_API_TOKEN"))
    parser.add_argument("--agent", default="keeper")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument(
        "--expect-tool-call",
        action="store_true",
        help="fail unless the agent called a host tool (the demo server's model does)",
    )
    args = parser.parse_args()
    api = Somna(args.url, args.token, timeout=args.timeout)

    print("health:", api.health()["status"])
    try:
        created = api.create_agent(
            args.agent, {"compaction": {"sleep_threshold": 0.6, "emergency_threshold": 0.85}}
        )
        print(f"created {created['id']} (model {created['config']['model']})")
    except ApiError as e:
        if e.code != "agent_exists":
            raise
        print(f"{args.agent} already exists; using it")

    # Run-time config: keep a short verbatim tail so that this short demo has something to compact.
    changed = api.configure(
        args.agent,
        {
            "compaction": {
                "preserve_messages": 6,
                "preserve_ratio": 0.0,
                "summary_max_tokens": 200,
                "sections": {"topic_arc": 60, "decisions": 30, "pending": 30, "user_facts": 50, "artifacts": 30},
            }
        },
    )
    print("preserve_messages now", changed["config"]["compaction"]["preserve_messages"])
    # A config change the runtime refuses names the field at fault.
    try:
        api.configure(args.agent, {"compaction": {"emergency_threshold": 0.1}})
    except ApiError as e:
        print(f"refused as expected: {e.code} {[f['field'] for f in e.fields]}")

    events, stream = api.events(args.agent)
    try:
        calls = converse(api, events, args.agent, "Hello! I'm Tobias, the miller.", "Tobias", args.timeout)
        calls += converse(
            api, events, args.agent, "Could you open the north door for me?", "Tobias", args.timeout
        )
        if args.expect_tool_call and calls == 0:
            raise RuntimeError("the agent called no host tool")
        api.observe(args.agent, "A storm rolls in from the west; the river is rising fast.")
        for i in range(4):
            converse(api, events, args.agent, f"The mill wheel turned {i + 2} times today.", "Tobias", args.timeout)
    finally:
        stream.close()

    outcome = api.compact(args.agent)
    if outcome["outcome"] == "done":
        print(
            f"compaction: {outcome['compacted']} messages -> summary, "
            f"{outcome['tokens_before']} -> {outcome['tokens_after']} tokens "
            f"({outcome['reduction_pct']:.0f}% reduction)"
        )
    else:
        print("compaction:", outcome["outcome"], outcome.get("reason", ""))
    status = api.status(args.agent)
    print(
        f"status: {status['state']}, usage {status['usage_pct']}%, "
        f"{status['history_len']} in history, {status['archive_len']} archived, "
        f"{status['compaction_count']} compactions"
    )

    # Every synthesis entry of the agent since yesterday, newest first, page by page.
    cursor, found = None, []
    while True:
        params = {"source_type": "compaction", "tag": "synthesis", "since": "1d", "limit": 10}
        if cursor is not None:
            params["cursor"] = cursor
        page = api.journal(args.agent, **params)
        found.extend(page["entries"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    print(f"synthesis entries since 1d: {len(found)}")
    for entry in found[:3]:
        print(f"  #{entry['id']} covers {entry.get('covers')}: {entry['content'][:100]!r}")
    if outcome["outcome"] == "done" and not found:
        raise RuntimeError("a compaction ran but no synthesis entry was found")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ApiError as e:
        print(f"API error {e.status} {e.code}: {e.message}", file=sys.stderr)
        sys.exit(1)
    except (RuntimeError, urllib.error.URLError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
