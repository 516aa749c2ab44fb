#!/usr/bin/env bash
# Schema-driven fuzzing of the HTTP API: schemathesis (from PyPI, pinned) reads the server's own
# OpenAPI document (GET /v1/openapi.json) and sends generated requests, valid and invalid, to every
# operation of a real `somna run --serve` (offline builtin model, loopback, a bearer token set so
# that the auth path is exercised too). It fails on any finding of these checks:
#
#   not_a_server_error            no 5xx answer, whatever the request
#   status_code_conformance       every status is one the document lists for the operation
#   content_type_conformance      every answer has the content type the document lists
#   response_schema_conformance   every body matches the document's schema for its status
#
# `GET /v1/events` (the SSE stream, open until the server stops) is not fuzzed: a request to it
# never ends. The server is seeded first, so that the document's examples reach real data: `smith`
# has a conversation, a compaction (a summary to undo), a sleep (journal, facts, an event log);
# `keeper` has a host tool (the builtin model never calls it, so a tool result meets no pending
# call); `wren` (the example of DELETE) was created through the API. The stateful phase creates agents of its own and follows the links from `POST /v1/agents`;
# the other ids the fuzzer makes up are mostly unknown agents (404).
#
#   scripts/fuzz-api.sh            build `somna` (debug), install schemathesis, fuzz, stop
#   SOMNA_BIN=path/to/somna scripts/fuzz-api.sh    the same against that binary, nothing built
#
# Bounded: SOMNA_FUZZ_EXAMPLES examples per operation and phase (default 100: about 4,000 requests,
# 20 s), and the whole run is stopped after SOMNA_FUZZ_TIMEOUT seconds (default 300; a hang guard,
# which fails the run).
# SOMNA_FUZZ_SEED (default 1) makes a run reproducible; SOMNA_FUZZ_SEED=random picks one (printed).
# SOMNA_FUZZ_SECONDS=N instead fuzzes for N seconds (schemathesis --max-time: the phases repeat
# until the time is spent), for longer runs by hand. The venv lives in $SOMNA_FUZZ_VENV (default
# target/fuzz-venv; made once); the server's log and schemathesis's JUnit report are left in
# target/fuzz-api/. Needs python3 3.11 or newer (schemathesis does) with venv, and PyPI the first
# time.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS=schemathesis==4.32.5
VENV=$(realpath -m "${SOMNA_FUZZ_VENV:-target/fuzz-venv}")
EXAMPLES=${SOMNA_FUZZ_EXAMPLES:-100}
TIMEOUT=${SOMNA_FUZZ_TIMEOUT:-300}
SEED=${SOMNA_FUZZ_SEED:-1}
OUT=$PWD/target/fuzz-api

say() { printf 'fuzz-api: %s\n' "$*" >&2; }
die() {
    printf 'fuzz-api: error: %s\n' "$*" >&2
    exit 1
}

# The tools: the `somna` binary (SOMNA_BIN when set, e.g. by .ci/run: the one its tests built) and
# schemathesis in its venv.
# shellcheck source=lib/somna-bin.sh
source scripts/lib/somna-bin.sh
somna=$(somna_bin)

if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -qF "${SCHEMATHESIS#*==}"; then
    say "installing $SCHEMATHESIS into $VENV"
    python3 -m venv "$VENV" || die "cannot make a venv with python3 (on Debian: apt-get install python3-venv)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "$SCHEMATHESIS" ||
        die "cannot install $SCHEMATHESIS from PyPI"
fi
say "$("$VENV/bin/schemathesis" --version)"

# The server: its own database and config in a temporary directory.
rm -rf "$OUT" && mkdir -p "$OUT"
work=$(mktemp -d)
server=
stop_server() {
    if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
        kill -INT "$server" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$server" 2>/dev/null || true
    fi
    server=
}
trap 'stop_server; rm -rf "$work"' EXIT
cat >"$work/runtime.toml" <<'EOF'
[store]
path = "db"
flush_every = "100ms"

[defaults]
tick_every = "100ms"

[defaults.compaction]
max_context_tokens = 2000
preserve_messages = 4
preserve_ratio = 0.0
min_compact_batch = 2
summary_max_tokens = 500
sections = { topic_arc = 150, decisions = 100, pending = 100, user_facts = 80, artifacts = 60 }

[[agents]]
id = "smith"
persona = "You are Brannoc, the blacksmith of Millbrook."

[[agents]]
id = "keeper"
persona = "You are Hild, the gatekeeper of Millbrook."

[[agents.tools]]
name = "open_door"
description = "Opens one of the keep's doors."
parameters = { type = "object", properties = { door = { type = "string" } }, required = ["door"] }
EOF
token=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
(cd "$work" && exec env SOMNA_API_TOKEN="$token" SOMNA_LOG=warn "$somna" \
    run --serve 127.0.0.1:0 --for "$((TIMEOUT + 60))s" --quiet) >"$OUT/server.out" 2>"$OUT/server.log" &
server=$!
url=
for _ in $(seq 300); do
    url=$(sed -n 's/^somna: API on \(http:[^ ]*\).*/\1/p' "$OUT/server.out")
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || die "somna run --serve exited; its log: $OUT/server.log"
    sleep 0.1
done
[ -n "$url" ] || die "somna run --serve printed no address within 30 s"
say "server: $url (pid $server, log $OUT/server.log)"

# Seed the agents the document's examples name.
python3 - "$url" "$token" <<'EOF' || die "seeding the server failed"
import json, sys, time, urllib.request

url, token = sys.argv[1], sys.argv[2]

def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)

def settled(agent, state="idle"):
    for _ in range(200):
        status = call("GET", "/v1/agents/" + agent)
        if not status["needs_reply"] and status["state"] == state:
            return status
        time.sleep(0.05)
    raise SystemExit(f"{agent} did not become {state}: {status}")

def say(agent, line):
    call("POST", f"/v1/agents/{agent}/input", {"type": "user", "content": line, "name": "Aldric"})

for line in ["Good morning! I'm Aldric, the miller.", "I need a new horseshoe for my mare.",
             "My sister Marta was married yesterday at the chapel.", "What do you charge for a sword?",
             "The north road is flooded again.", "Could you mend my plough by Friday?"]:
    say("smith", line)
    settled("smith")
call("POST", "/v1/agents/smith/input", {"type": "observation", "content": "Snow starts to fall."})
compaction = call("POST", "/v1/agents/smith/compact", {"force": True})["outcome"]
sleep = call("POST", "/v1/agents/smith/sleep")["outcome"]
say("smith", "Good night, Brannoc.")
settled("smith")
say("keeper", "Could you open the north door for me?")
settled("keeper")
call("POST", "/v1/agents", {"id": "wren", "config": {"persona": "You are Wren, the steward."}})
print(f"fuzz-api: seeded smith (compaction {compaction}, sleep {sleep}), keeper, wren",
      file=sys.stderr)
EOF

# The run. Exit 1 from schemathesis: findings; anything else: it could not run.
args=(run "$url/v1/openapi.json"
    --header "Authorization: Bearer $token"
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance
    --exclude-path /v1/events
    --max-examples "$EXAMPLES"
    --workers 1
    --request-timeout 30
    --generation-database none
    --no-color
    --report junit --report-junit-path "$OUT/junit.xml")
if [ "$SEED" = random ]; then
    SEED=$(python3 -c 'import random; print(random.randrange(1 << 31))')
fi
args+=(--seed "$SEED")
[ -n "${SOMNA_FUZZ_SECONDS:-}" ] && args+=(--max-time "$SOMNA_FUZZ_SECONDS")
say "schemathesis ${args[*]/$token/<token>} (seed $SEED)"
started=$(date +%s)
status=0
# In $OUT: schemathesis keeps a cache of what it found in the working directory.
(cd "$OUT" && exec timeout --signal=INT "$TIMEOUT" "$VENV/bin/schemathesis" "${args[@]}") || status=$?
say "schemathesis took $(($(date +%s) - started)) s"

# The server must have survived it.
health=$(curl -fsS --max-time 5 "$url/healthz" 2>/dev/null || true)
case "$health" in
*'"status":"ok"'*) ;;
*) die "the server no longer answers /healthz after the run; its log: $OUT/server.log" ;;
esac
stop_server
if grep -q "panicked" "$OUT/server.log"; then
    die "the server panicked during the run; its log: $OUT/server.log"
fi
case $status in
0) say "no findings" ;;
124) die "the run did not finish within $TIMEOUT s (SOMNA_FUZZ_TIMEOUT)" ;;
1) die "schemathesis found failures (above; rerun with SOMNA_FUZZ_SEED=$SEED to reproduce)" ;;
*) die "schemathesis could not run (exit $status)" ;;
esac
