"""The NPC typeclass whose agent lives in Somna.

    from evennia import create_object
    npc = create_object(
        "somna_npc.typeclasses.SomnaNPC", key="Brannoc", location=smithy,
        attributes=[("persona", "You are Brannoc, the blacksmith of Millbrook."),
                    ("sleep_threshold", 0.6), ("emergency_threshold", 0.85),
                    ("max_context_tokens", 8192)])

What flows where:

- a `say` (or a `whisper` to the NPC) in its room -> `send(agent, speech, name=speaker)`: input the
  agent owes a reply to;
- the agent's reply (event `agent_replied`, or read back from its history after a gap; see
  `somna_npc.bridge`) -> `at_say(reply)`: said in the room like any character's speech;
- anything else someone does in the room that the NPC is shown (arrivals, departures, poses,
  objects dropped or given), and what it sees when it arrives in a room -> an observation:
  journaled and in the agent's context, no reply owed. What another Somna NPC says is an
  observation too, so that two NPCs in one room do not talk to each other forever;
- `somna_compact()`, `somna_sleep()`, `somna_status()` (and the `@somna` command) -> the API's
  compact, sleep and status.

Per-NPC agent config is in Attributes (set them with `create_object(attributes=...)` or
`@set npc/sleep_threshold = 0.6`): `persona`, `sleep_threshold`, `emergency_threshold`,
`max_context_tokens`, and `somna_config` for any other key of the API's agent config (e.g.
`{"compaction": {"preserve_messages": 8}}`). They reach the agent when it is created; a change
reaches it before the NPC's next call to Somna, or at once with `@somna/sync`.
"""

import copy

from evennia import AttributeProperty, DefaultCharacter, DefaultRoom
from evennia.utils import logger
from evennia.utils.utils import inherits_from
from evennia.utils.ansi import strip_ansi

from . import conf
from .bridge import TAG_CATEGORY, field, get_bridge

# Attribute -> key of the agent's `compaction` config.
COMPACTION_ATTRIBUTES = ("sleep_threshold", "emergency_threshold", "max_context_tokens")


def merge(base, over):
    """`over` merged into a copy of `base`, dicts recursively."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def plain(text):
    """Evennia's markup and ANSI codes removed; whitespace trimmed."""
    return strip_ansi(text or "").strip()


class SomnaNPCMixin:
    """Mix into any character typeclass: `class Smith(SomnaNPCMixin, Character)`."""

    is_somna_npc = True

    # The agent's id on the Somna server; None: SOMNA_AGENT_PREFIX + the NPC's dbid (stored at
    # creation, so that renaming the prefix later does not orphan the agent).
    somna_agent = AttributeProperty(None, autocreate=False)
    # None: "You are <key>. <desc>"
    persona = AttributeProperty(None, autocreate=False)
    # None: the server's defaults (runtime.toml's [defaults.compaction]).
    sleep_threshold = AttributeProperty(None, autocreate=False)
    emergency_threshold = AttributeProperty(None, autocreate=False)
    max_context_tokens = AttributeProperty(None, autocreate=False)
    # Any other agent config (the API's AgentOverrides), merged under the attributes above.
    somna_config = AttributeProperty(None, autocreate=False)
    # Observe what happens in the room (False: only speech reaches the agent).
    somna_observe_room = AttributeProperty(True, autocreate=False)

    # --- identity and config ------------------------------------------------------------------

    def somna_agent_id(self):
        """The agent's id on the Somna server."""
        return self.somna_agent or f"{conf.get('SOMNA_AGENT_PREFIX')}{self.id}"

    def somna_agent_config(self):
        """The config the agent is created (or configured) with: SOMNA_DEFAULT_CONFIG, then
        `somna_config`, then the persona and threshold attributes."""
        config = merge(conf.get("SOMNA_DEFAULT_CONFIG") or {}, self.somna_config or {})
        config["persona"] = self.persona or config.get("persona") or self.somna_default_persona()
        compaction = dict(config.get("compaction") or {})
        for key in COMPACTION_ATTRIBUTES:
            value = getattr(self, key)
            if value is not None:
                compaction[key] = value
        if compaction:
            config["compaction"] = compaction
        return config

    def somna_default_persona(self):
        desc = plain(self.db.desc)
        return f"You are {self.key}." + (f" {desc}" if desc else "")

    def somna_update_tag(self):
        """Keeps the tag that maps the agent id to this NPC up to date."""
        agent = self.somna_agent_id()
        current = self.tags.get(category=TAG_CATEGORY, return_list=True)
        if current != [agent.lower()]:
            self.tags.clear(category=TAG_CATEGORY)
            self.tags.add(agent, category=TAG_CATEGORY)

    # --- creation and moves -------------------------------------------------------------------

    def at_object_creation(self):
        super().at_object_creation()
        self.ndb.somna_creating = True

    def at_object_post_creation(self):
        """After create_object's attributes are set: fix the agent id, create the agent and show
        it the room."""
        super().at_object_post_creation()
        self.ndb.somna_creating = False
        if self.attributes.get("somna_agent") is None:
            self.somna_agent = self.somna_agent_id()
        self.somna_update_tag()
        self.somna_sync().addErrback(self._somna_log, "creating the agent")
        self._somna_quietly(self.somna_look_around(), "sending what it sees")

    def at_post_move(self, source_location, move_type="move", **kwargs):
        super().at_post_move(source_location, move_type=move_type, **kwargs)
        if not self.ndb.somna_creating and self.location:
            self._somna_quietly(self.somna_look_around(), "sending what it sees")

    # --- what the NPC perceives ---------------------------------------------------------------

    def at_msg_receive(self, text=None, from_obj=None, **kwargs):
        try:
            self.somna_perceive(text, from_obj, **kwargs)
        except Exception:  # noqa: BLE001 - perceiving must never break the sender's command
            logger.log_trace()
        return super().at_msg_receive(text=text, from_obj=from_obj, **kwargs)

    def somna_perceive(self, text, from_obj, **kwargs):
        """Routes one message the NPC is shown: speech to the agent, the rest as observations."""
        if text is None or from_obj is None:
            return  # the NPC's own look, system messages: not something that happened here
        senders = from_obj if isinstance(from_obj, (list, tuple)) else [from_obj]
        sender = senders[0]
        if sender == self:
            return
        if isinstance(text, (list, tuple)):
            message, options = text[0], (text[1] if len(text) > 1 else {}) or {}
        else:
            message, options = text, {}
        if not isinstance(message, str):
            return
        msgtype = options.get("type")
        if msgtype in ("say", "whisper") and not getattr(sender, "is_somna_npc", False):
            speech = self.somna_parse_speech(message)
            if speech:
                name = (
                    plain(sender.get_display_name(self))
                    if hasattr(sender, "get_display_name")
                    else str(sender)
                )
                self._somna_quietly(self.somna_hear(speech, name), "sending speech")
            return
        if self.somna_observe_room:
            line = plain(message)
            if line:
                self._somna_quietly(self.somna_observe(line), "sending an observation")

    def somna_parse_speech(self, message):
        """The words spoken in a say/whisper message as this NPC is shown it: Evennia's default
        templates are `{object} says, "{speech}"` and `{object} whispers: "{speech}"`, so the text
        between the first and the last double quote. Override for other templates."""
        line = plain(message)
        first, last = line.find('"'), line.rfind('"')
        if 0 <= first < last:
            return line[first + 1 : last].strip()
        return line

    def somna_hear(self, speech, name):
        """`name` says `speech` to the agent: it owes a reply. A Deferred of the client's answer."""
        return get_bridge().say(self, speech, name=name)

    def somna_observe(self, text):
        """Tells the agent that `text` happened (journaled and in context; no reply owed).
        A Deferred of the client's answer."""
        return get_bridge().observe(self, text)

    def somna_look_around(self):
        """Shows the agent the room as this NPC sees it: description, exits, who and what is here.
        Nothing when the NPC is not in a room (carried, as `@create` leaves it before `/drop`)."""
        if not self.location or not inherits_from(self.location, DefaultRoom):
            return None
        appearance = plain(self.location.return_appearance(self))
        return self.somna_observe(f"You are here: {appearance}")

    # --- what the agent does ------------------------------------------------------------------

    def at_somna_event(self, event):
        """An event of the agent from Somna's event stream (reactor thread). Replies are said;
        override to act on the others (`sleep_started`, `compaction_completed`, `turn_failed`...).
        """
        etype = field(event, "type")
        if etype == "agent_replied":
            self.somna_reply(field(event, "seq"), field(event, "text"))
        elif etype in ("turn_failed", "error", "warning"):
            logger.log_warn(f"somna: {self.somna_agent_id()}: {etype}: {event}")

    def somna_reply(self, seq, text):
        """Says the agent's reply with history seq `seq`, unless it was said already."""
        said = self.attributes.get("somna_said_seq")
        if seq is None or (said is not None and seq <= said):
            return
        self.db.somna_said_seq = seq
        text = self.at_pre_say(text)
        if text:
            self.at_say(text)

    # --- operations ---------------------------------------------------------------------------

    def somna_sync(self):
        """Creates the agent, or gives the existing one this NPC's config (idempotent).
        Fires with True when the agent was created."""
        return get_bridge().sync(self)

    def somna_compact(self, force=True):
        """Compacts the agent now (`force`: whatever its usage). Fires with the outcome."""
        return get_bridge().compact(self, force=force)

    def somna_sleep(self):
        """Puts the agent to sleep now: consolidation, reflection, compaction at the sleep
        threshold. Fires with the result."""
        return get_bridge().sleep(self)

    def somna_status(self):
        """Fires with the agent's status."""
        return get_bridge().status(self)

    def _somna_log(self, failure, doing):
        logger.log_warn(f"somna: {self.somna_agent_id()}: {doing}: {failure.getErrorMessage()}")

    def _somna_quietly(self, deferred, doing):
        """Logs the failure of a call nobody waits for (what the NPC perceives): the game goes on,
        and the Evennia log says what Somna did not get."""
        if deferred is not None:
            deferred.addErrback(self._somna_log, doing)


class SomnaNPC(SomnaNPCMixin, DefaultCharacter):
    """A non-player character whose agent lives in Somna."""
