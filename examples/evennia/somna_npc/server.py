"""Start and stop the bridge with the Evennia server. In the game's
`server/conf/at_server_startstop.py`:

    from somna_npc import server as somna_server

    def at_server_start():
        somna_server.at_server_start()

    def at_server_stop():
        somna_server.at_server_stop()

`at_server_start` opens the event stream at once, so that the replies that came while the server
was down or reloading are said right away (each NPC catches up from its agent's history); without
it the bridge starts when an NPC first needs it.
"""

from .bridge import get_bridge, stop_bridge


def at_server_start():
    get_bridge()


def at_server_stop():
    stop_bridge()
