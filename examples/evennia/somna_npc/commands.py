"""`@somna`: look at and operate a Somna NPC's agent from inside the game.

Add `SomnaCmdSet` to the builders' command set, e.g. in the game's `commands/default_cmdsets.py`:

    from somna_npc.commands import SomnaCmdSet

    class CharacterCmdSet(default_cmds.CharacterCmdSet):
        def at_cmdset_creation(self):
            super().at_cmdset_creation()
            self.add(SomnaCmdSet)
"""

from evennia import CmdSet
from evennia.commands.default.muxcommand import MuxCommand

from .bridge import field


def describe_compaction(outcome):
    """One line about a CompactionOutcome."""
    kind = field(outcome, "outcome")
    if kind == "done":
        return (
            f"done: {field(outcome, 'compacted')} messages summarized, "
            f"{field(outcome, 'tokens_before')} -> {field(outcome, 'tokens_after')} tokens"
        )
    if kind == "skipped":
        reason = field(outcome, "reason")
        return f"skipped ({field(reason, 'reason', reason)})"
    if kind == "failed":
        return f"failed ({field(outcome, 'reason')})"
    if kind == "stalled":
        return f"stalled (it would save only {field(outcome, 'reduction_pct'):.1f}%)"
    return str(kind)


class CmdSomna(MuxCommand):
    """
    look at or operate the Somna agent of an NPC

    Usage:
      @somna <npc>                  - the agent's state, context usage and counts
      @somna/compact <npc>          - compact its context now, whatever its usage
      @somna/sleep <npc>            - put it to sleep now (consolidation, reflection,
                                      compaction at its sleep threshold)
      @somna/observe <npc> = <text> - tell it that something happened
      @somna/sync <npc>             - create its agent, or push the NPC's config
                                      (persona, thresholds) to the existing one

    The answer comes when the Somna server has answered (a sleep can take a while with
    a real model); the game goes on meanwhile.
    """

    key = "@somna"
    aliases = ["somna"]
    switch_options = ("compact", "sleep", "observe", "sync")
    locks = "cmd:perm(Builder)"
    help_category = "Building"

    def func(self):
        caller = self.caller
        if not self.lhs:
            caller.msg(f"Usage: {self.key}[/compact|/sleep|/observe|/sync] <npc> [= text]")
            return
        npc = caller.search(self.lhs)
        if not npc:
            return
        if not getattr(npc, "is_somna_npc", False):
            caller.msg(f"{npc.get_display_name(caller)} is not a Somna NPC.")
            return
        name = npc.get_display_name(caller)
        agent = npc.somna_agent_id()
        switch = self.switches[0] if self.switches else None

        def report(text):
            caller.msg(f"|wSomna|n {name} ({agent}): {text}")

        def failed(failure):
            report(f"|rfailed|n: {failure.getErrorMessage()}")

        if switch == "compact":
            report("compacting...")
            d = npc.somna_compact(force=True)
            d.addCallback(lambda outcome: report(f"compaction {describe_compaction(outcome)}"))
        elif switch == "sleep":
            report("going to sleep...")
            d = npc.somna_sleep()

            def slept(result):
                if field(result, "outcome") != "slept":
                    return report(f"sleep refused ({field(result, 'outcome')}): try again shortly")
                compaction = field(result, "compaction")
                error = field(result, "error")
                text = "slept"
                if compaction is not None:
                    text += f"; compaction {describe_compaction(compaction)}"
                if error:
                    text += f"; error: {error}"
                report(text)

            d.addCallback(slept)
        elif switch == "observe":
            if not self.rhs:
                caller.msg(f"Usage: {self.key}/observe <npc> = <what happened>")
                return
            d = npc.somna_observe(self.rhs)
            d.addCallback(lambda _: report("observed."))
        elif switch == "sync":
            d = npc.somna_sync()
            d.addCallback(lambda created: report("created." if created else "config updated."))
        else:
            d = npc.somna_status()

            def show(status):
                compaction = field(field(status, "config"), "compaction")
                report(
                    f"{field(status, 'state')}, usage {100 * field(status, 'usage'):.1f}% of "
                    f"{field(status, 'max_context_tokens')} tokens, "
                    f"{field(status, 'history_len')} in history, "
                    f"{field(status, 'archive_len')} archived, "
                    f"{field(status, 'compaction_count')} compactions; thresholds: sleep "
                    f"{field(compaction, 'sleep_threshold')}, emergency "
                    f"{field(compaction, 'emergency_threshold')}"
                )

            d.addCallback(show)
        d.addErrback(failed)


class SomnaCmdSet(CmdSet):
    key = "somna"

    def at_cmdset_creation(self):
        self.add(CmdSomna())
