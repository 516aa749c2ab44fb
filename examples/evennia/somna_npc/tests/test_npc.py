"""SomnaNPC against a real Somna server, through Evennia's own test classes and runner.

Evennia's reactor does not run under the test runner, so the tests turn it by hand while they wait
(`wait_for`): `reactor.runUntilCurrent()` runs what the bridge's threads handed to the reactor
thread (`callFromThread`: the results of HTTP calls, the events of the stream), and
`reactor.doIteration(t)` waits for the next such hand-over (Twisted's waker ends the wait at once)
or `t`, whichever is first. Every wait has a deadline and fails with what it waited for; nothing
waits a fixed time. The HTTP calls, the thread pool and the event stream are the real ones.
"""

import time
import uuid
from unittest import mock

import evennia
from django.test import override_settings
from evennia import create_object
from evennia.utils.ansi import strip_ansi
from evennia.utils.test_resources import EvenniaTest
from twisted.internet import reactor

import somna

from somna_npc import bridge as bridge_module
from somna_npc.commands import SomnaCmdSet
from somna_npc.typeclasses import SomnaNPC

from .server import SomnaServer

SERVER = None
TIMEOUT = 30.0  # seconds: the longest any one wait may take


def setUpModule():
    global SERVER
    SERVER = SomnaServer().start()


def tearDownModule():
    global SERVER
    if SERVER is not None:
        SERVER.stop()
        SERVER = None


def wait_for(predicate, what, timeout=TIMEOUT):
    """Turns the reactor until `predicate()` is true; its value. Fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        reactor.runUntilCurrent()
        value = predicate()
        if value:
            return value
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        reactor.doIteration(min(remaining, 0.05))


def result_of(deferred, what):
    """The result of a Deferred that fires in the reactor thread (raises its failure)."""
    box = []
    deferred.addBoth(box.append)
    wait_for(lambda: box, what)
    result = box[0]
    if hasattr(result, "raiseException"):
        result.raiseException()
    return result


class SomnaNPCTest(EvenniaTest):
    """A room with Char (puppeted, with a session), Char2 and objects, as EvenniaTest makes it,
    plus Brannoc, a SomnaNPC whose agent is new on the test's Somna server."""

    def setUp(self):
        super().setUp()
        settings = override_settings(
            SOMNA_URL=SERVER.url,
            SOMNA_TOKEN=SERVER.token,
            SOMNA_TIMEOUT=30.0,
            SOMNA_RECONNECT_MAX=0.5,
        )
        settings.enable()
        self.addCleanup(settings.disable)
        bridge_module.stop_bridge()
        self.bridge = bridge_module.get_bridge()
        self.api = somna.Client(SERVER.url, token=SERVER.token, timeout=30.0)
        self.addCleanup(self.api.close)
        wait_for(self.bridge.connected.is_set, "the event stream to connect")
        # Char is a Developer: give it @somna, as a game gives its builders (README.md).
        self.char1.cmdset.add(SomnaCmdSet)
        # Char2 has no session: record what reaches it.
        self.char2_msg = mock.patch.object(self.char2, "msg", wraps=self.char2.msg).start()
        self.agent = f"brannoc-{uuid.uuid4().hex[:8]}"
        self.npc = self.make_npc("Brannoc", self.agent)

    def tearDown(self):
        mock.patch.stopall()
        # Let what is in flight land while the test's objects still exist, then stop.
        self.bridge.stop_listening()
        wait_for(lambda: self.bridge.idle(), "the bridge's calls to finish")
        bridge_module.stop_bridge()
        reactor.runUntilCurrent()
        super().tearDown()

    # --- helpers ------------------------------------------------------------------------------

    def make_npc(self, key, agent, **attributes):
        attrs = {
            "somna_agent": agent,
            "persona": f"You are {key}, the blacksmith of the village.",
            "sleep_threshold": 0.5,
            "emergency_threshold": 0.9,
            "max_context_tokens": 6000,
            # Small enough that a forced compaction has something to fold after a few exchanges.
            "somna_config": {
                "compaction": {
                    "preserve_messages": 2,
                    "preserve_ratio": 0.0,
                    "min_compact_batch": 2,
                }
            },
        }
        attrs.update(attributes)
        npc = create_object(
            SomnaNPC, key=key, location=self.room1, home=self.room1, attributes=list(attrs.items())
        )
        # Created, and its first observation (the room) is in its history.
        wait_for(
            lambda: self.history(agent, "user"), f"the agent {agent} and its first observation"
        )
        return npc

    def history(self, agent=None, role=None):
        """The agent's live history (messages of `role` only, if given); [] while it does not exist."""
        try:
            page = self.api.history(agent or self.agent, limit=1000)
        except somna.ApiError as e:
            if e.code == "unknown_agent":
                return []
            raise
        return [m for m in page.messages if role is None or m.role == role]

    def session_texts(self, char):
        """What the sessions of `char` were sent, as plain text, in order."""
        sessions = set(char.sessions.all())
        texts = []
        for call in evennia.SESSION_HANDLER.data_out.mock_calls:
            if call.args and call.args[0] in sessions and "text" in call.kwargs:
                text = call.kwargs["text"]
                texts.append(strip_ansi(text[0] if isinstance(text, tuple) else text))
        return texts

    def msg_texts(self, mocked_msg):
        texts = []
        for call in mocked_msg.mock_calls:
            text = call.kwargs.get("text", call.args[0] if call.args else None)
            if text is not None:
                texts.append(strip_ansi(text[0] if isinstance(text, tuple) else text))
        return texts

    def said_by(self, npc, texts):
        prefix = f'{npc.key} says, "'
        return [t for t in texts if t.startswith(prefix)]

    def converse(self, line, speaker=None, npc=None):
        """`speaker` (Char) says `line`; waits until Char hears the NPC's answer; returns it."""
        speaker = speaker or self.char1
        npc = npc or self.npc
        before = len(self.said_by(npc, self.session_texts(self.char1)))
        speaker.execute_cmd(f"say {line}")
        said = wait_for(
            lambda: self.said_by(npc, self.session_texts(self.char1))[before:],
            f"{npc.key} to answer {line!r}",
        )
        return said[0]

    # --- the tests ----------------------------------------------------------------------------

    def test_say_reaches_the_agent_and_its_reply_is_said_in_the_room(self):
        line = "Good morning, Brannoc! I need a new horseshoe for my mare."
        heard = self.converse(line)

        # The agent got the speech itself, with the speaker's name, as input it owes a reply to.
        users = [m for m in self.history(role="user") if m.name == "Char"]
        self.assertEqual([m.content for m in users], [line])
        # What the room heard is the reply as the server recorded it, said by the NPC.
        replies = [
            m for m in self.history(role="assistant") if m.seq > users[0].seq and m.content.strip()
        ]
        self.assertEqual(len(replies), 1, replies)
        self.assertEqual(heard, f'Brannoc says, "{replies[0].content}"')
        self.assertIn(heard, self.msg_texts(self.char2_msg))
        self.assertEqual(self.npc.db.somna_said_seq, replies[0].seq)

        # The same reply again, read back from the history (as after a reconnect) or as an event
        # that arrives after the history was read, is not said twice.
        result_of(self.bridge.catch_up(self.agent), "a catch-up")
        event = somna.AgentReplied(
            agent=self.agent, at=0, seq=replies[0].seq, text=replies[0].content
        )
        self.bridge._dispatch(event)
        self.assertEqual(len(self.said_by(self.npc, self.session_texts(self.char1))), 1)

        # A whisper to the NPC is input too (answered aloud).
        self.char1.execute_cmd("whisper Brannoc = Is the old mine safe?")
        wait_for(
            lambda: len(self.said_by(self.npc, self.session_texts(self.char1))) == 2, "the answer"
        )
        users = [m for m in self.history(role="user") if m.name == "Char"]
        self.assertEqual([m.content for m in users], [line, "Is the old mine safe?"])

    def test_room_events_reach_the_agent_as_observations(self):
        observations = lambda: [
            m.content for m in self.history(role="user") if m.name != "Char"
        ]  # noqa: E731
        # What the NPC saw on arrival: the room, who and what is in it.
        first = observations()[0]
        for seen in ("Room", "room_desc", "Char2", "Obj", "Obj2"):
            self.assertIn(seen, first)

        self.char1.execute_cmd("pose waves at the blacksmith.")
        self.char2.move_to(self.room2)
        self.char1.execute_cmd("@somna/observe Brannoc = A cart rattles past the forge.")
        wait_for(
            lambda: any("Char waves at the blacksmith." in o for o in observations())
            and any("Char2 is leaving Room" in o for o in observations())
            and any("A cart rattles past the forge." in o for o in observations())
            and any(t.endswith("observed.") for t in self.session_texts(self.char1)),
            "the pose, the departure and the builder's line as observations",
        )
        # Observations owe no reply: the agent said nothing, so the NPC said nothing.
        self.assertFalse(self.api.status(self.agent).needs_reply)
        self.assertEqual(self.said_by(self.npc, self.session_texts(self.char1)), [])

    def test_another_somna_npc_is_observed_not_answered(self):
        other = f"hild-{uuid.uuid4().hex[:8]}"
        hild = self.make_npc("Hild", other, persona="You are Hild, the gatekeeper.")
        heard = self.converse("Good evening, Brannoc.")
        speech = heard  # 'Brannoc says, "..."'
        wait_for(
            lambda: any(m.content.endswith(speech) for m in self.history(other, "user")),
            "Hild to observe what Brannoc said",
        )
        # Hild heard Char too (input it answers) and Brannoc only as an observation.
        self.assertEqual(
            [m.content for m in self.history(other, "user") if m.name == "Char"],
            ["Good evening, Brannoc."],
        )
        self.assertFalse(any(m.name == "Brannoc" for m in self.history(other, "user")))
        self.assertIsNotNone(hild.db.somna_said_seq)

    def test_thresholds_come_from_the_npc_and_creation_is_idempotent(self):
        config = self.api.status(self.agent).config
        self.assertEqual(config.persona, "You are Brannoc, the blacksmith of the village.")
        self.assertEqual(config.compaction.sleep_threshold, 0.5)
        self.assertEqual(config.compaction.emergency_threshold, 0.9)
        self.assertEqual(config.compaction.max_context_tokens, 6000)
        self.assertEqual(config.compaction.preserve_messages, 2)

        # A changed attribute reaches the agent before the NPC's next call.
        self.npc.sleep_threshold = 0.6
        self.converse("Hello there.")
        self.assertEqual(self.api.status(self.agent).config.compaction.sleep_threshold, 0.6)

        # A config the server refuses is reported by @somna/sync, naming the field; nothing changes.
        self.npc.emergency_threshold = 0.55
        self.char1.execute_cmd("@somna/sync Brannoc")
        refused = wait_for(
            lambda: [t for t in self.session_texts(self.char1) if "failed" in t],
            "@somna/sync to answer",
        )
        self.assertIn("invalid_config", refused[0])
        self.assertIn("emergency_threshold", refused[0])
        self.assertEqual(self.api.status(self.agent).config.compaction.emergency_threshold, 0.9)
        self.npc.emergency_threshold = 0.95
        self.char1.execute_cmd("@somna/sync Brannoc")
        wait_for(
            lambda: any("config updated." in t for t in self.session_texts(self.char1)),
            "@somna/sync to answer",
        )
        self.assertEqual(self.api.status(self.agent).config.compaction.emergency_threshold, 0.95)

        # The NPC is deleted and made again for the same agent (a world rebuilt): it adopts the
        # agent without an error, and does not say its past replies again.
        last = self.history()[-1].seq
        self.npc.delete()
        again = create_object(
            SomnaNPC, key="Brannoc", location=self.room1, attributes=[("somna_agent", self.agent)]
        )
        wait_for(lambda: again.db.somna_said_seq is not None, "the new NPC to sync")
        self.assertEqual(again.db.somna_said_seq, last)
        self.assertFalse(result_of(again.somna_sync(), "a second sync"))
        result_of(self.bridge.catch_up(self.agent), "a catch-up")
        self.assertEqual(
            len(self.said_by(again, self.session_texts(self.char1))), 1
        )  # "Hello there."'s answer
        self.assertEqual([a.id for a in self.api.agents().agents].count(self.agent), 1)
        self.npc = again

    def test_a_builder_makes_an_npc_in_game(self):
        prefix = f"evennia-{uuid.uuid4().hex[:8]}-"
        with override_settings(SOMNA_AGENT_PREFIX=prefix):
            self.char1.execute_cmd("@create/drop Wren:somna_npc.typeclasses.SomnaNPC")
            wren = wait_for(lambda: [o for o in self.room1.contents if o.key == "Wren"], "Wren")[0]
            agent = f"{prefix}{wren.id}"
            self.assertEqual(wren.somna_agent_id(), agent)
            first = wait_for(
                lambda: self.history(agent, "user"), "Wren's agent and its first observation"
            )
            # What it saw once dropped in the room (not the builder's inventory it was made in).
            self.assertTrue(
                first[0].content.startswith("[observation] You are here: Room\n"), first[0].content
            )
            self.assertEqual(self.api.status(agent).config.persona, "You are Wren.")

            # Thresholds set in game reach the agent at the NPC's next call (here: @somna).
            self.char1.execute_cmd("@set Wren/sleep_threshold = 0.65")
            self.char1.execute_cmd("@set Wren/emergency_threshold = 0.92")
            self.char1.execute_cmd("@somna Wren")
            shown = wait_for(
                lambda: [t for t in self.session_texts(self.char1) if "thresholds" in t],
                "@somna to answer",
            )
            self.assertIn("thresholds: sleep 0.65, emergency 0.92", shown[0])
            compaction = self.api.status(agent).config.compaction
            self.assertEqual(
                (compaction.sleep_threshold, compaction.emergency_threshold), (0.65, 0.92)
            )
            heard = self.converse("Good morning, Wren.", npc=wren)
            self.assertTrue(heard.startswith('Wren says, "'))

    def test_compaction_and_sleep_go_through_the_npc(self):
        for line in (
            "I'm Aldric, the miller from the north road.",
            "My sister Marta was married yesterday at the chapel.",
            "Could you mend my plough by Friday?",
            "The north road is flooded again.",
        ):
            self.converse(line)
        before = self.api.status(self.agent)
        self.assertEqual(before.compaction_count, 0)

        self.char1.execute_cmd("@somna/compact Brannoc")
        done = wait_for(
            lambda: [t for t in self.session_texts(self.char1) if "compaction done" in t],
            "@somna/compact to answer",
        )
        self.assertIn(f"({self.agent})", done[0])
        status = self.api.status(self.agent)
        self.assertEqual(status.compaction_count, 1)
        self.assertLess(status.history_len, before.history_len)
        self.assertGreater(status.archive_len, 0)
        synthesis = self.api.journal(self.agent, source_type="compaction").entries
        self.assertEqual(len(synthesis), 1)
        self.assertEqual([e.event.type for e in self.api.event_log(self.agent)], ["compaction"])

        self.char1.execute_cmd("@somna/sleep Brannoc")
        wait_for(
            lambda: [t for t in self.session_texts(self.char1) if ": slept" in t],
            "@somna/sleep to answer",
        )
        events = [e.event for e in self.api.event_log(self.agent)]
        self.assertEqual(events[0].type, "sleep")  # newest first
        self.assertGreater(events[0].entries, 0)
        # Consolidation went over the journal: Char's news are consolidated now.
        notes = self.api.journal(self.agent, source_type="note").entries
        self.assertTrue(notes)
        self.assertTrue(all(e.consolidated for e in notes))

        # And @somna shows the state the API reports.
        self.char1.execute_cmd("@somna Brannoc")
        shown = wait_for(
            lambda: [t for t in self.session_texts(self.char1) if "compactions; thresholds" in t],
            "@somna to answer",
        )
        self.assertIn("1 compactions; thresholds: sleep 0.5, emergency 0.9", shown[0])

    def test_replies_missed_while_the_stream_was_down_are_said_after_it_reconnects(self):
        self.bridge.stop_listening()
        line = "Are you still there, Brannoc?"
        self.char1.execute_cmd(f"say {line}")
        # The agent answers while no stream is open: the reply is only in its history.
        asked = wait_for(
            lambda: [m for m in self.history(role="user") if m.content == line],
            "the input to arrive",
        )[0]
        reply = wait_for(
            lambda: [
                m for m in self.history(role="assistant") if m.seq > asked.seq and m.content.strip()
            ],
            "the agent to reply",
        )[0]
        self.assertEqual(self.said_by(self.npc, self.session_texts(self.char1)), [])

        self.bridge.start_listening()
        heard = wait_for(
            lambda: self.said_by(self.npc, self.session_texts(self.char1)),
            "the missed reply to be said",
        )
        self.assertEqual(heard, [f'Brannoc says, "{reply.content}"'])

    def test_the_npc_talks_on_after_the_somna_server_crashes_and_restarts(self):
        first = self.converse("Hello before the crash.")
        subscribed = self.bridge.subscriptions
        address = SERVER.url.split("://", 1)[1]
        SERVER.stop(keep=True, kill=True)  # SIGKILL: a crash
        self.addCleanup(lambda: SERVER.proc is None and SERVER.start(address))  # for the next tests

        # Speech while the server is down: the player's command works, the NPC logs what failed.
        with mock.patch("somna_npc.typeclasses.logger.log_warn") as warn:
            self.char1.execute_cmd("say Is anyone there?")
            logged = wait_for(
                lambda: [c.args[0] for c in warn.mock_calls if "sending speech" in c.args[0]],
                "the failed send to be logged",
            )
        self.assertIn(self.agent, logged[0])
        self.assertIn('You say, "Is anyone there?"', self.session_texts(self.char1))

        SERVER.start(address)  # same address, same database
        # The client's stream reconnects by itself (Reconnected); the bridge catches up, goes on.
        wait_for(lambda: self.bridge.subscriptions > subscribed, "the event stream to reconnect")
        second = self.converse("Hello after the restart.")
        self.assertEqual(self.said_by(self.npc, self.session_texts(self.char1)), [first, second])
        users = [m.content for m in self.history(role="user") if m.name == "Char"]
        self.assertEqual(users, ["Hello before the crash.", "Hello after the restart."])
