"""Evennia NPCs whose minds live in Somna.

`somna_npc.typeclasses.SomnaNPC` is a character without an account: what is said in its room
reaches its Somna agent as input with the speaker's name, what else happens there reaches it as
observations, and the agent's replies are said in the room. The agent is created on the Somna
server the first time the NPC needs it, with the NPC's own thresholds.

- `somna_npc.bridge`: the one `SomnaBridge` of the server process (the Somna client, its thread
  pool and the event-stream listener); every HTTP call runs off the reactor thread.
- `somna_npc.typeclasses`: `SomnaNPCMixin` and `SomnaNPC`.
- `somna_npc.commands`: `@somna` (status, compact, sleep, observe, sync) and `SomnaCmdSet`.
- `somna_npc.server`: `at_server_start()` / `at_server_stop()` to call from the game's
  `server/conf/at_server_startstop.py`.

Settings (the game's `server/conf/settings.py`): `SOMNA_URL`, `SOMNA_TOKEN`, and the optional ones
listed in `somna_npc.conf`. See README.md beside this package.
"""
