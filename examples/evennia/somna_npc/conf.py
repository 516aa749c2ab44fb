"""The Django settings this package reads, with their defaults.

| setting | default | meaning |
|---|---|---|
| `SOMNA_URL` | `"http://127.0.0.1:7878"` | the Somna server (`somna run --serve`) |
| `SOMNA_TOKEN` | `None` | its bearer token (`SOMNA_API_TOKEN` of the server), if it has one |
| `SOMNA_TIMEOUT` | `60.0` | seconds one request may take (compact and sleep wait for the model) |
| `SOMNA_THREADS` | `4` | threads of the pool that makes the HTTP calls, off the reactor |
| `SOMNA_AGENT_PREFIX` | `"evennia-"` | an NPC without a `somna_agent` attribute is agent PREFIX + its dbid |
| `SOMNA_DEFAULT_CONFIG` | `{}` | agent config (the API's `AgentOverrides`) under every NPC's own |
| `SOMNA_RECONNECT_MAX` | `30.0` | the longest wait, in seconds, between two event-stream reconnects |
"""

from django.conf import settings

DEFAULTS = {
    "SOMNA_URL": "http://127.0.0.1:7878",
    "SOMNA_TOKEN": None,
    "SOMNA_TIMEOUT": 60.0,
    "SOMNA_THREADS": 4,
    "SOMNA_AGENT_PREFIX": "evennia-",
    "SOMNA_DEFAULT_CONFIG": {},
    "SOMNA_RECONNECT_MAX": 30.0,
}


def get(name):
    """The value of setting `name` (one of DEFAULTS), or its default."""
    return getattr(settings, name, DEFAULTS[name])
