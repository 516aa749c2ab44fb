"""Fixtures: real `somna run --serve` servers on loopback, each with its own temporary data
directory and a bearer token, so that every test goes through the real HTTP API and its auth.

The binary is `$SOMNA_BIN`, else the repository's `target/debug/somna`
(`cargo build -p somna-cli --bin somna`). The config keeps ticks short and the context window
small, so that the offline builtin model replies at once and a few inputs are enough to compact.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Callable, Optional, TypeVar

import pytest

import somna

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[3]
STARTUP_TIMEOUT = 30.0
CONFIG = """\
[store]
path = "db"
flush_every = "100ms"

[defaults]
tick_every = "20ms"

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
"""
LISTENING = re.compile(r"^somna: API on (http://\S+)", re.MULTILINE)


def somna_binary() -> Path:
    binary = Path(os.environ.get("SOMNA_BIN") or REPO / "target" / "debug" / "somna")
    if not binary.is_file():
        pytest.exit(
            f"no somna binary at {binary}: build it (cargo build -p somna-cli --bin somna) "
            "or set SOMNA_BIN",
            returncode=2,
        )
    return binary


def wait_for(
    probe: Callable[[], Optional[T]], what: str, timeout: float = 10.0, every: float = 0.02
) -> T:
    """Polls `probe` until it returns something other than None or False; fails at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


class Server:
    """One `somna run --serve` process over a data directory; it can be killed and started
    again on the same directory and port."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.token = secrets.token_hex(16)
        self.url = ""
        self.port = 0
        self.starts = 0
        self._process: Optional[subprocess.Popen[bytes]] = None
        (workdir / "runtime.toml").write_text(CONFIG)

    def start(self) -> None:
        """Starts the server (on the port it had, after the first start) and waits until it
        listens."""
        self.starts += 1
        out = self.workdir / f"server-{self.starts}.out"
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("SOMNA_CONFIG", "SOMNA_DB", "SOMNA_SERVER", "SOMNA_API_BIND")
        }
        env.update(SOMNA_API_TOKEN=self.token, SOMNA_LOG="warn")
        with open(out, "wb") as stdout, open(self.workdir / "server.log", "ab") as stderr:
            self._process = subprocess.Popen(
                [
                    str(somna_binary()),
                    "--config",
                    str(self.workdir / "runtime.toml"),
                    "run",
                    "--serve",
                    f"127.0.0.1:{self.port}",
                    "--quiet",
                ],
                cwd=self.workdir,
                env=env,
                stdout=stdout,
                stderr=stderr,
                stdin=subprocess.DEVNULL,
            )
        process = self._process

        def listening() -> Optional[str]:
            if process.poll() is not None:
                log = (self.workdir / "server.log").read_text(errors="replace")[-3000:]
                pytest.fail(f"somna run --serve exited with {process.returncode}:\n{log}")
            match = LISTENING.search(out.read_text(errors="replace"))
            return match.group(1) if match else None

        self.url = wait_for(listening, "the server to listen", timeout=STARTUP_TIMEOUT)
        self.port = int(self.url.rsplit(":", 1)[1])

    def kill(self) -> None:
        """Kills the server at once (SIGKILL): no graceful shutdown, connections reset."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)

    def stop(self) -> None:
        """Stops the server gracefully (SIGINT, as ctrl-c), killing it if it hangs."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> None:
        """Kills the server and starts it again on the same data directory and port."""
        self.kill()
        self.start()

    def client(self, **kwargs: object) -> somna.Client:
        return somna.Client(self.url, token=self.token, **kwargs)  # type: ignore[arg-type]

    def async_client(self, **kwargs: object) -> somna.AsyncClient:
        return somna.AsyncClient(self.url, token=self.token, **kwargs)  # type: ignore[arg-type]


TEST_TIMEOUT = 60


@pytest.fixture(autouse=True)
def test_deadline() -> Iterator[None]:
    """Fails a test that runs past TEST_TIMEOUT seconds (a stream waiting for an event that never
    comes) instead of letting it hang the suite."""

    def expire(signum: int, frame: object) -> None:
        # pytest's failure is a BaseException: no `except Exception` on the way swallows it.
        pytest.fail(f"the test ran for more than {TEST_TIMEOUT} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(TEST_TIMEOUT)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server shared by the tests that do not stop it."""
    server = Server(tmp_path_factory.mktemp("somna"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Server]:
    """A server of the test's own, which it may kill and restart."""
    server = Server(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def client(server: Server) -> Iterator[somna.Client]:
    with server.client() as client:
        yield client


_ids = itertools.count()


@pytest.fixture
def new_id(request: pytest.FixtureRequest) -> Callable[[], str]:
    """Makes agent ids unique to the test run, named after the test."""
    base = re.sub(r"[^A-Za-z0-9_.-]", "-", request.node.name)[:40]

    def make() -> str:
        return f"{base}-{next(_ids)}"

    return make


@pytest.fixture
def agent(client: somna.Client, new_id: Callable[[], str]) -> str:
    """A new agent on the shared server."""
    agent = new_id()
    client.create_agent(agent, persona="You are Wren, the steward of Millbrook.")
    return agent


def settle(client: somna.Client, agent: str) -> somna.AgentStatus:
    """Waits until the agent is idle and owes no reply."""

    def settled() -> Optional[somna.AgentStatus]:
        status = client.status(agent)
        return status if status.state == "idle" and not status.needs_reply else None

    return wait_for(settled, f"{agent} to settle")


TOOLS = ["plough", "sickle", "anvil", "bellows", "tongs", "hammer", "chisel", "hinge", "kettle"]
FARMS = ["north", "south", "east", "west"]


_fills = itertools.count(3)


def fill(client: somna.Client, agent: str, count: int = 8, what: str = "A carter came") -> None:
    """Gives the agent `count` observations, each unlike any other, so that a forced compaction of
    them commits a summary smaller than what it replaces."""
    for i in range(count):
        tool, farm, pay = TOOLS[i % len(TOOLS)], FARMS[i % len(FARMS)], next(_fills)
        client.observe(
            agent,
            f"{what}: Jory brought a broken {tool} from the {farm} farm and paid {pay} copper.",
        )


def persist(client: somna.Client, agent: str) -> None:
    """Makes sure everything the server wrote so far is on disk before a test kills it: an input is
    acknowledged once the store is flushed (`[store] durable_acks`), and a flush takes every
    earlier write along. Compactions, sleeps and replies are answered before their flush, so a
    kill right after one can lose it (and the event log then hands its seq to the next event)."""
    client.observe(agent, "The bell of the chapel rings the hour.")
