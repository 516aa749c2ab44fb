#!/usr/bin/env python3
"""Replays recorded chat requests against a real OpenAI-compatible server and reports, per turn,
how many prompt tokens the server had to evaluate (prefill) and how long each request took.

    scripts/prefill.py BASE_URL REQUESTS.jsonl [--log SERVER_LOG] [--turns N] [--model M]

REQUESTS.jsonl holds one JSON array of chat messages per line (tool results are sent as user
messages, since the dump keeps no call ids) (the prefix bench writes them with
SOMNA_PREFIX_DUMP=DIR). Each request asks for one token, so its time is mostly prefill. With --log
(llama-cpp-python's server log), the evaluated token count of each request is read from the
`prompt eval time = … / N tokens` line the server prints; without it only times are reported.
Standard library only.
"""
import argparse
import json
import os
import re
import time
import urllib.request

EVAL = re.compile(r"prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base_url")
    ap.add_argument("requests")
    ap.add_argument("--log")
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--model", default="smollm2")
    args = ap.parse_args()
    with open(args.requests) as f:
        requests = [json.loads(line) for line in f if line.strip()][: args.turns]
    # Tool results go as user messages (the dump keeps no call ids); the same for both layouts.
    for messages in requests:
        for m in messages:
            if m["role"] == "tool":
                m["role"] = "user"
                m["content"] = "[tool result] " + m["content"]
    log_at = os.path.getsize(args.log) if args.log else 0
    rows = []
    for i, messages in enumerate(requests):
        body = json.dumps({"model": args.model, "messages": messages, "max_tokens": 1,
                           "temperature": 0}).encode()
        req = urllib.request.Request(args.base_url.rstrip("/") + "/chat/completions", body,
                                     {"content-type": "application/json"})
        started = time.monotonic()
        with urllib.request.urlopen(req, timeout=600) as r:
            answer = json.load(r)
        seconds = time.monotonic() - started
        evaluated = None
        if args.log:
            time.sleep(0.05)
            with open(args.log, errors="replace") as f:
                f.seek(log_at)
                fresh = f.read()
                log_at = f.tell()
            found = EVAL.findall(fresh)
            if found:
                evaluated = int(found[-1][1])
        prompt = answer.get("usage", {}).get("prompt_tokens")
        rows.append((i, prompt, evaluated, seconds))
        print(f"turn {i:3d}: prompt {prompt} tokens, evaluated {evaluated}, {seconds * 1000:.0f} ms",
              flush=True)
    steady = rows[1:]
    total_prompt = sum(r[1] or 0 for r in steady)
    total_eval = sum(r[2] or 0 for r in steady if r[2] is not None)
    total_time = sum(r[3] for r in steady)
    print(f"turns 1..{len(rows) - 1}: prompt tokens {total_prompt}, evaluated {total_eval} "
          f"({100.0 * total_eval / max(total_prompt, 1):.1f}%), mean {1000 * total_time / max(len(steady), 1):.0f} ms per request")


if __name__ == "__main__":
    main()
