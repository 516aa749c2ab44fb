"""The bridge between Evennia's reactor and a Somna server.

Evennia runs game code in Twisted's reactor thread, and the database (Django's ORM) may be touched
only there. Somna's client is synchronous (HTTP with blocking sockets). So:

- every HTTP call runs in the bridge's own `ThreadPool` (`deferToThreadPool`), and its result comes
  back to the reactor thread as a `Deferred`. The pool is the bridge's, not the reactor's: a sleep
  with a real model can hold a thread for a minute, and the reactor's pool serves Evennia too;
- the input of one agent (what is said, what is observed) is sent in the order it happened: one
  `DeferredLock` per agent, so a later line never overtakes an earlier one in the pool;
- a listener thread reads Somna's event stream (`GET /v1/events`) and hands each event to the
  reactor thread (`reactor.callFromThread`), where the NPCs are looked up and speak;
- nothing is read from or written to Evennia's database outside the reactor thread.

How replies arrive, and why it is robust: the event stream brings each `agent_replied` as soon as
the agent has written it, for whatever input caused it. But a stream has gaps: it is down while
Evennia reloads or the connection drops, and a subscriber that falls behind gets `lagged` instead
of the events it missed. The stream carries no ids to resume from, so the agent's history (the
store's durable record, the same text the event carries) is the source of truth: each NPC keeps
the seq of the last reply it said (`db.somna_said_seq`), and whenever the stream (re)connects or
reports `lagged`, the bridge reads the history after that seq and says what was missed, merged in
seq order with the events that arrive meanwhile. A reply is said once: its seq is checked against
the mark before it is said.
"""

import threading

from twisted.internet import reactor
from twisted.internet.defer import DeferredLock, fail, succeed
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

from evennia.utils import logger

import somna

from . import conf

# The tag category that maps agent ids to the NPCs that speak for them.
TAG_CATEGORY = "somna_agent"

# The event types the listener subscribes to (`lagged` always comes).
EVENT_TYPES = (
    "agent_replied",
    "turn_failed",
    "sleep_started",
    "sleep_completed",
    "compaction_completed",
    "compaction_failed",
    "warning",
    "error",
)


def field(obj, name, default=None):
    """`obj.name` or `obj[name]`: reads the client's dataclasses and plain dicts alike."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


class SomnaBridge:
    """One Evennia server process's link to one Somna server.

    Args:
        url: the Somna server, e.g. `http://127.0.0.1:7878`.
        token: its bearer token, if it has one.
        timeout: seconds one request may take.
        threads: the most HTTP calls in flight at once.
        reconnect_max: the longest wait between two event-stream reconnects, in seconds.
    """

    def __init__(self, url, token=None, timeout=60.0, threads=4, reconnect_max=30.0):
        self.url = url
        self.client = somna.Client(url, token=token, timeout=timeout)
        self.pool = ThreadPool(minthreads=0, maxthreads=threads, name="somna")
        self.reconnect_max = reconnect_max
        self._locks = {}  # agent id -> DeferredLock: one agent's input in order
        self._ready = set()  # agents known to exist on the server with their NPC's config
        self._configs = {}  # agent id -> the config it was last created or configured with
        self._catching_up = {}  # agent id -> replies that arrived while its history was read
        self._in_flight = 0  # calls in the pool whose result the reactor has not had yet
        self._stopping = threading.Event()  # the current listener's stop flag
        self._listener = None
        self._stream = None
        self.connected = threading.Event()  # set once the stream is subscribed, until it ends
        self.subscriptions = 0  # how many times the stream was (re)subscribed

    # --- life cycle ---------------------------------------------------------------------------

    def start(self):
        """Starts the pool and the event-stream listener (reactor thread)."""
        self.pool.start()
        self.start_listening()

    def start_listening(self):
        """Starts the listener thread, unless it runs."""
        if self._listener is not None and self._listener.is_alive() and not self._stopping.is_set():
            return
        # Each listener has its own stop flag: one that is still finishing cannot be revived.
        self._stopping = stop = threading.Event()
        self._listener = threading.Thread(
            target=self._listen, args=(stop,), name="somna-events", daemon=True
        )
        self._listener.start()

    def stop_listening(self, timeout=5.0):
        """Stops the listener thread: closes the stream and waits for the thread, at most `timeout`."""
        self._stopping.set()
        stream = self._stream
        if stream is not None:
            try:
                stream.close()
            except Exception:  # noqa: BLE001 - it may be closing already
                pass
        if self._listener is not None:
            self._listener.join(timeout)
        self._listener = None
        self.connected.clear()

    def stop(self):
        """Stops the listener and the pool (waits for the calls in flight); closes the client."""
        self.stop_listening()
        self.pool.stop()
        self.client.close()

    # --- calls --------------------------------------------------------------------------------

    def call(self, fn, *args, **kwargs):
        """Runs `fn(*args, **kwargs)` in the pool; a Deferred that fires in the reactor thread."""
        self._in_flight += 1
        d = deferToThreadPool(reactor, self.pool, fn, *args, **kwargs)

        def settled(result):
            self._in_flight -= 1
            return result

        return d.addBoth(settled)

    def idle(self):
        """True when no call is in flight or waiting for its agent's earlier calls."""
        return self._in_flight == 0 and not any(lock.locked for lock in self._locks.values())

    def _lock(self, agent):
        lock = self._locks.get(agent)
        if lock is None:
            lock = self._locks[agent] = DeferredLock()
        return lock

    def run(self, npc, fn, *args, ordered=True):
        """Runs `fn(client, agent, *args)` in the pool once the NPC's agent exists on the server
        with the NPC's config.

        The agent is created (or, when it exists, given the NPC's config) before the first call of
        this process, whenever the NPC's config changed since (an attribute set with `@set`), and
        when the server no longer knows it. `ordered`: after the NPC's earlier ordered calls
        (input); compact and sleep need not wait behind input in flight. Reactor thread; the
        Deferred fires there with `fn`'s result.
        """
        try:
            agent = npc.somna_agent_id()
            config = npc.somna_agent_config()
            npc.somna_update_tag()
        except Exception:  # noqa: BLE001 - a bad attribute value: report it to the caller
            return fail()
        if self._configs.get(agent) != config:
            self._ready.discard(agent)
        want_mark = npc.attributes.get("somna_said_seq") is None
        job = lambda: self.call(self._with_agent, agent, config, want_mark, fn, args)  # noqa: E731
        if ordered or agent not in self._ready:
            d = self._lock(agent).run(job)
        else:
            d = job()

        def done(result):
            synced, value = result
            if synced is not None:
                self._synced(npc, *synced)
            return value

        return d.addCallback(done)

    def sync(self, npc):
        """Creates the NPC's agent, or gives the existing one the NPC's config; fires with True
        when it was created."""
        self._ready.discard(npc.somna_agent_id())
        return self.run(npc, lambda client, agent: None).addCallback(
            lambda _: npc.ndb.somna_created
        )

    def _with_agent(self, agent, config, want_mark, fn, args):
        """Pool thread: makes sure the agent exists, then calls `fn`; returns (synced, result)."""
        synced = None
        if agent not in self._ready:
            synced = self._create_or_configure(agent, config, want_mark)
        try:
            return synced, fn(self.client, agent, *args)
        except somna.ApiError as e:
            if e.code != "unknown_agent":
                raise
        # The server lost the agent (a new database): create it again and retry once.
        self._ready.discard(agent)
        synced = self._create_or_configure(agent, config, want_mark)
        return synced, fn(self.client, agent, *args)

    def _create_or_configure(self, agent, config, want_mark):
        """Pool thread: creates the agent with `config`, or gives it `config` when it exists;
        returns (created, the seq of its last message when `want_mark` else None)."""
        try:
            self.client.create_agent(agent, **config)
            created, last = True, -1
        except somna.ApiError as e:
            if e.code != "agent_exists":
                raise
            if config:
                self.client.configure(agent, **config)
            created, last = False, (self._last_seq(agent) if want_mark else None)
        self._configs[agent] = config
        self._ready.add(agent)
        return created, last

    def _last_seq(self, agent):
        """Pool thread: the seq of the last message of the agent's history (-1 when empty)."""
        last, from_seq = -1, 0
        while from_seq is not None:
            page = self.client.history(agent, from_seq=from_seq, limit=1000)
            messages = field(page, "messages") or []
            if messages:
                last = field(messages[-1], "seq")
            from_seq = field(page, "next_from_seq")
        return last

    def _synced(self, npc, created, last):
        """Reactor thread: the NPC's agent was created or configured."""
        npc.ndb.somna_created = created
        if last is not None and npc.attributes.get("somna_said_seq") is None:
            # A new agent: say everything from the start. An existing one that this NPC never
            # spoke for: say only what comes from now on, not its whole past.
            npc.db.somna_said_seq = last

    # --- the calls the NPCs make --------------------------------------------------------------

    def say(self, npc, text, name=None):
        """Someone speaks to the NPC's agent (it owes a reply)."""
        return self.run(npc, lambda client, agent: client.send(agent, text, name=name))

    def observe(self, npc, text):
        """Something happens in the NPC's world (journaled, no reply owed)."""
        return self.run(npc, lambda client, agent: client.observe(agent, text))

    def compact(self, npc, force=True):
        return self.run(
            npc, lambda client, agent: client.compact(agent, force=force), ordered=False
        )

    def sleep(self, npc):
        return self.run(npc, lambda client, agent: client.sleep(agent), ordered=False)

    def status(self, npc):
        return self.run(npc, lambda client, agent: client.status(agent), ordered=False)

    def journal(self, npc, **query):
        return self.run(npc, lambda client, agent: client.journal(agent, **query), ordered=False)

    # --- events -------------------------------------------------------------------------------

    def npcs(self, agent):
        """Reactor thread: the NPCs that speak for `agent`."""
        from evennia import search_tag

        return [
            obj
            for obj in search_tag(agent, category=TAG_CATEGORY)
            if hasattr(obj, "at_somna_event") and obj.somna_agent_id() == agent
        ]

    def all_agents(self):
        """Reactor thread: every agent some NPC speaks for."""
        from evennia import search_tag

        return {
            obj.somna_agent_id()
            for obj in search_tag(category=TAG_CATEGORY)
            if hasattr(obj, "at_somna_event")
        }

    def _listen(self, stop):
        """Listener thread: reads the event stream until `stop` is set.

        The client's stream reconnects by itself (never giving up: `Reconnect(max_attempts=None)`)
        and yields `Reconnected` after each reconnection; the live stream cannot resume, so each
        (re)connection is followed by a catch-up from the histories. Errors the client does not
        retry (a wrong token: 401) end the stream; it is opened again after a backoff.
        """
        delay = 0.25
        policy = somna.Reconnect(max_attempts=None, max_delay=self.reconnect_max)
        while not stop.is_set():
            stream = None
            try:
                stream = self.client.events(types=EVENT_TYPES, reconnect=policy)
                self._stream = stream
                if stop.is_set():
                    break
                self._on_connect()  # subscribed: what was missed can be read now
                delay = 0.25
                for event in stream:
                    if stop.is_set():
                        break
                    if isinstance(event, somna.Reconnected):
                        self._on_connect()
                        continue
                    reactor.callFromThread(self._dispatch, event)
            except Exception as e:  # noqa: BLE001 - a server that is down, a refused token
                if not stop.is_set():
                    logger.log_warn(
                        f"somna: event stream from {self.url}: {e}; opening it again in {delay:.1f} s"
                    )
            finally:
                if stream is not None:
                    stream.close()
                if not stop.is_set():
                    self.connected.clear()
                    self._stream = None
            if stop.wait(delay):
                break
            delay = min(delay * 2, self.reconnect_max)

    def _on_connect(self):
        """Listener thread: the stream is subscribed; the reactor catches up on the histories."""
        self.subscriptions += 1
        self.connected.set()
        reactor.callFromThread(self.catch_up_all)

    def _dispatch(self, event):
        """Reactor thread: one event of the stream."""
        etype = field(event, "type")
        if etype == "lagged":
            logger.log_warn(f"somna: missed {field(event, 'missed')} events; reading histories")
            self.catch_up_all()
            return
        agent = field(event, "agent")
        if agent is None:
            return
        if etype == "agent_replied" and agent in self._catching_up:
            self._catching_up[agent].append((field(event, "seq"), field(event, "text")))
            return
        for npc in self.npcs(agent):
            try:
                npc.at_somna_event(event)
            except Exception:  # noqa: BLE001 - one NPC's bug must not stop the others
                logger.log_trace()

    def catch_up_all(self):
        """Reactor thread: says, for every NPC, the replies it missed."""
        for agent in self.all_agents():
            self.catch_up(agent)

    def catch_up(self, agent):
        """Reactor thread: reads the agent's history after the lowest mark of its NPCs and says
        what they missed (merged with the replies that arrive meanwhile)."""
        if agent in self._catching_up:
            return succeed(None)
        marks = [npc.attributes.get("somna_said_seq") for npc in self.npcs(agent)]
        marks = [m for m in marks if m is not None]
        if not marks:
            return succeed(None)  # never synced: its first call sets the mark
        self._catching_up[agent] = []
        d = self.call(self._replies_after, agent, min(marks))

        def done(replies):
            arrived = self._catching_up.pop(agent, [])
            merged = dict(replies)
            merged.update(arrived)
            for npc in self.npcs(agent):
                for seq in sorted(merged):
                    npc.somna_reply(seq, merged[seq])

        def failed(failure):
            logger.log_warn(
                f"somna: cannot read the history of {agent}: {failure.getErrorMessage()}"
            )
            done([])

        return d.addCallbacks(done, failed)

    def _replies_after(self, agent, after):
        """Pool thread: [(seq, text)] of the agent's replies in history after seq `after`."""
        replies, from_seq = [], after + 1
        while from_seq is not None:
            page = self.client.history(agent, from_seq=from_seq, limit=1000)
            for m in field(page, "messages") or []:
                kind = field(field(m, "kind"), "type", "normal")
                if (
                    field(m, "role") == "assistant"
                    and kind == "normal"
                    and not field(m, "tool_calls")
                    and (field(m, "content") or "").strip()
                ):
                    replies.append((field(m, "seq"), field(m, "content")))
            from_seq = field(page, "next_from_seq")
        return replies


_BRIDGE = None


def get_bridge():
    """The bridge of this server process, made and started from the settings on first use."""
    global _BRIDGE
    if _BRIDGE is None:
        _BRIDGE = SomnaBridge(
            conf.get("SOMNA_URL"),
            token=conf.get("SOMNA_TOKEN"),
            timeout=conf.get("SOMNA_TIMEOUT"),
            threads=conf.get("SOMNA_THREADS"),
            reconnect_max=conf.get("SOMNA_RECONNECT_MAX"),
        )
        _BRIDGE.start()
    return _BRIDGE


def stop_bridge():
    """Stops and forgets the bridge (the next `get_bridge()` makes a new one)."""
    global _BRIDGE
    bridge, _BRIDGE = _BRIDGE, None
    if bridge is not None:
        bridge.stop()
