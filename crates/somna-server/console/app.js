// The Somna console: plain browser JavaScript, no library and no build step. It swaps in HTML
// fragments the server renders (/console/f/...), sends actions to the JSON API (/v1/...), and
// reads the SSE streams with fetch (so the bearer token can go in a header, which EventSource
// cannot send). The token, when the server has one, is asked for once and kept in sessionStorage.
"use strict";

const app = document.getElementById("app");
const tokenForm = document.getElementById("token-form");
const live = document.getElementById("live");
let token = sessionStorage.getItem("somna-token") || "";
let streams = []; // AbortControllers of the open SSE streams
let view = null; // what the page shows: {kind: "agents", params} or {kind: "agent", id}

class Unauthorized extends Error {}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token) h["Authorization"] = "Bearer " + token;
  return h;
}

async function fetchText(path) {
  const r = await fetch(path, { headers: headers() });
  if (r.status === 401) throw new Unauthorized();
  const text = await r.text();
  if (!r.ok) throw new Error(errorMessage(text, r.status));
  return text;
}

function errorMessage(text, status) {
  try {
    return JSON.parse(text).error.message;
  } catch (_) {
    return "HTTP " + status;
  }
}

async function api(method, path, body) {
  const r = await fetch(path, {
    method,
    headers: headers({ "Content-Type": "application/json" }),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (r.status === 401) throw new Unauthorized();
  const text = await r.text();
  if (!r.ok) throw new Error(errorMessage(text, r.status));
  return text ? JSON.parse(text) : null;
}

function askForToken(message) {
  closeStreams();
  app.replaceChildren();
  tokenForm.hidden = false;
  document.getElementById("token-error").textContent = message || "";
  document.getElementById("token-input").focus();
}

tokenForm.addEventListener("submit", (e) => {
  e.preventDefault();
  token = document.getElementById("token-input").value.trim();
  sessionStorage.setItem("somna-token", token);
  tokenForm.hidden = true;
  route();
});

// Runs `work`; a 401 asks for the token (again), other errors are shown.
async function guarded(work) {
  try {
    await work();
  } catch (e) {
    if (e instanceof Unauthorized) {
      askForToken(token ? "That token was refused." : "");
    } else {
      const p = document.createElement("p");
      p.className = "error";
      p.textContent = String(e.message || e);
      app.prepend(p);
    }
  }
}

// --- SSE over fetch -------------------------------------------------------------------------

function closeStreams() {
  streams.forEach((c) => c.abort());
  streams = [];
  live.textContent = "○ offline";
  live.className = "";
}

// Reads `path` as Server-Sent Events, calling onEvent(json, id) per event; reconnects after a
// second (with Last-Event-ID when the stream gave ids) until the view changes.
function follow(path, onEvent) {
  const control = new AbortController();
  streams.push(control);
  let lastId = null;
  const run = async () => {
    while (!control.signal.aborted) {
      try {
        const extra = { Accept: "text/event-stream" };
        if (lastId !== null) extra["Last-Event-ID"] = lastId;
        const r = await fetch(path, { headers: headers(extra), signal: control.signal });
        if (r.status === 401) throw new Unauthorized();
        if (!r.ok) throw new Error("HTTP " + r.status);
        live.textContent = "● live";
        live.className = "on";
        const reader = r.body.getReader();
        const decoder = new TextDecoder();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += decoder.decode(value, { stream: true });
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            const frame = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            let data = [];
            for (const line of frame.split("\n")) {
              if (line.startsWith("data:")) data.push(line.slice(5).trim());
              if (line.startsWith("id:")) lastId = line.slice(3).trim();
            }
            if (data.length) onEvent(JSON.parse(data.join("\n")), lastId);
          }
        }
      } catch (e) {
        if (control.signal.aborted) return;
        if (e instanceof Unauthorized) return askForToken("That token was refused.");
      }
      live.textContent = "○ reconnecting";
      live.className = "";
      await new Promise((r) => setTimeout(r, 1000));
    }
  };
  run();
}

// Calls `fn` at most once per `ms`, trailing.
function throttle(fn, ms) {
  let timer = null;
  let again = false;
  return () => {
    if (timer) {
      again = true;
      return;
    }
    fn();
    timer = setTimeout(() => {
      timer = null;
      if (again) {
        again = false;
        fn();
      }
    }, ms);
  };
}

// --- the agents page ------------------------------------------------------------------------

function agentsParams() {
  const q = location.hash.split("?")[1] || "";
  const p = new URLSearchParams(q);
  return {
    sort: p.get("sort") || "id",
    dir: p.get("dir") || "asc",
    q: p.get("q") || "",
    state: p.get("state") || "",
    page: p.get("page") || "0",
  };
}

function setAgentsParams(changes) {
  const p = Object.assign(agentsParams(), changes);
  location.hash = "#/agents?" + new URLSearchParams(p).toString();
}

async function showAgents() {
  const p = agentsParams();
  app.innerHTML =
    '<div class="filters">' +
    '<input id="agents-filter" placeholder="filter by id">' +
    '<select id="agents-state"><option value="">any state</option>' +
    ["idle", "stepping", "compacting", "sleeping", "waiting_for_tools"]
      .map((s) => `<option value="${s}">${s}</option>`)
      .join("") +
    "</select></div><div id=\"agents\"></div>";
  const filter = document.getElementById("agents-filter");
  const state = document.getElementById("agents-state");
  filter.value = p.q;
  state.value = p.state;
  let typing = null;
  filter.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => setAgentsParams({ q: filter.value, page: "0" }), 250);
  });
  state.addEventListener("change", () => setAgentsParams({ state: state.value, page: "0" }));
  const load = async () => {
    const html = await fetchText("/console/f/agents?" + new URLSearchParams(agentsParams()));
    document.getElementById("agents").innerHTML = html;
    if (window.somnaFirstView === undefined) window.somnaFirstView = performance.now();
  };
  await load();
  const refresh = throttle(() => guarded(load), 1000);
  follow("/v1/events", () => refresh());
}

app.addEventListener("click", (e) => {
  const th = e.target.closest("th[data-sort]");
  if (th) {
    const p = agentsParams();
    const dir = p.sort === th.dataset.sort && p.dir === "asc" ? "desc" : "asc";
    setAgentsParams({ sort: th.dataset.sort, dir, page: "0" });
  }
  const pager = e.target.closest("#agents-prev, #agents-next");
  if (pager && !pager.disabled) setAgentsParams({ page: pager.dataset.page });
});

// --- one agent's page -----------------------------------------------------------------------

function agentPath(id, rest) {
  return "/v1/agents/" + encodeURIComponent(id) + (rest || "");
}

function fragmentPath(id, rest) {
  return "/console/f/agents/" + encodeURIComponent(id) + (rest || "");
}

async function swap(targetId, path) {
  const el = document.getElementById(targetId);
  if (!el) return;
  el.innerHTML = await fetchText(path);
}

async function refreshChart(id) {
  const html = await fetchText(fragmentPath(id, "/chart"));
  const chart = document.getElementById("chart");
  if (!chart) return;
  chart.innerHTML = html;
  const update = chart.querySelector("#summary-update");
  if (update) {
    document.getElementById("agent-summary").innerHTML = update.innerHTML;
    update.remove();
  }
}

function say(targetId, text, error) {
  const el = document.getElementById(targetId);
  if (!el) return;
  el.textContent = text;
  el.className = error ? "error" : "";
}

async function showAgent(id) {
  app.innerHTML = await fetchText(fragmentPath(id));
  await Promise.all([
    swap("journal", fragmentPath(id, "/journal")),
    swap("facts", fragmentPath(id, "/facts")),
    swap("archive", fragmentPath(id, "/archive")),
    swap("prompt", fragmentPath(id, "/prompt")),
  ]);
  const history = throttle(() => guarded(() => swap("history", fragmentPath(id, "/history"))), 300);
  const chart = throttle(() => guarded(() => refreshChart(id)), 300);
  // The live events: replies and tool calls change the history; anything else (a compaction
  // starting or ending, a sleep, an emergency) the chart and the summary.
  follow("/v1/events?agent=" + encodeURIComponent(id), (event) => {
    if (event.type === "agent_replied" || event.type === "tool_call_requested") history();
    chart();
  });
  // The durable log: a new logged event (a compaction, a sleep) redraws the chart, on whichever
  // node wrote it.
  follow(agentPath(id, "/events"), () => {
    chart();
    history();
  });
}

app.addEventListener("submit", (e) => {
  const form = e.target;
  const id = document.getElementById("agent-title")?.dataset.agent;
  if (!id) return;
  e.preventDefault();
  const data = new FormData(form);
  guarded(async () => {
    if (form.id === "input-form") {
      const content = String(data.get("content") || "");
      const body = { type: "user", content };
      const name = String(data.get("name") || "").trim();
      if (name) body.name = name;
      try {
        await api("POST", agentPath(id, "/input"), body);
        form.reset();
        say("action-result", "sent; the reply appears below when the agent answers");
        await swap("history", fragmentPath(id, "/history"));
      } catch (err) {
        if (err instanceof Unauthorized) throw err;
        say("action-result", err.message, true);
      }
    } else if (form.id === "config-form") {
      const compaction = {};
      for (const [key, value] of data.entries()) {
        if (String(value).trim() === "") continue;
        compaction[key] = Number(value);
      }
      try {
        await api("PATCH", agentPath(id, "/config"), { compaction });
        say("config-status", "saved");
        await refreshChart(id);
      } catch (err) {
        if (err instanceof Unauthorized) throw err;
        say("config-status", err.message, true);
      }
    } else if (form.id === "prompt-form") {
      await swap("prompt", fragmentPath(id, "/prompt?") + new URLSearchParams(data));
    } else if (form.id === "archive-form") {
      await swap("archive", fragmentPath(id, "/archive?") + new URLSearchParams(data));
    } else if (form.id === "journal-form") {
      await swap("journal", fragmentPath(id, "/journal?") + new URLSearchParams(data));
    }
  });
});

app.addEventListener("click", (e) => {
  const id = document.getElementById("agent-title")?.dataset.agent;
  if (!id) return;
  const button = e.target.closest("#compact-now, #sleep-now, button.uncompact");
  if (!button) return;
  guarded(async () => {
    try {
      if (button.id === "compact-now") {
        const force = document.getElementById("compact-force").checked;
        const outcome = await api("POST", agentPath(id, "/compact"), { force });
        say("action-result", "compaction: " + (outcome.outcome || JSON.stringify(outcome)));
      } else if (button.id === "sleep-now") {
        await api("POST", agentPath(id, "/sleep"), {});
        say("action-result", "slept");
      } else {
        const seq = Number(button.dataset.seq);
        await api("POST", agentPath(id, "/uncompact"), { summary_seq: seq });
        say("action-result", "compaction #" + seq + " undone");
      }
    } catch (err) {
      if (err instanceof Unauthorized) throw err;
      say("action-result", err.message, true);
    }
    await Promise.all([refreshChart(id), swap("history", fragmentPath(id, "/history"))]);
  });
});

// --- routing --------------------------------------------------------------------------------

function route() {
  closeStreams();
  tokenForm.hidden = true;
  const hash = location.hash || "#/agents";
  if (hash.startsWith("#/agent/")) {
    const id = decodeURIComponent(hash.slice("#/agent/".length));
    view = { kind: "agent", id };
    guarded(() => showAgent(id));
  } else {
    view = { kind: "agents" };
    guarded(showAgents);
  }
}

window.addEventListener("hashchange", route);
route();
