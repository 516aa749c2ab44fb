"""A real `somna run --serve` for the tests: loopback, a free port, a bearer token, the offline
builtin model, its own database in a temporary directory.

The binary is `$SOMNA_BIN`, else `somna` on the PATH.
"""

import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading

RUNTIME_TOML = """\
[store]
path = "db"
flush_every = "50ms"

[llm]
provider = "builtin"
model = "builtin"

[defaults]
persona = "You live in a small village. Speak plainly, in a few sentences."
tick_every = "50ms"
sleep_every = "6h"

[defaults.compaction]
max_context_tokens = 4096
"""

ADDRESS = re.compile(r"^somna: API on (http://\S+)")


class SomnaServer:
    """Starts `somna run --serve 127.0.0.1:0` and reads the address it printed."""

    def __init__(self, binary=None, startup_timeout=30.0):
        self.binary = binary or os.environ.get("SOMNA_BIN") or shutil.which("somna")
        if not self.binary or not os.access(self.binary, os.X_OK):
            raise RuntimeError(
                "no somna binary: set SOMNA_BIN (scripts/test-evennia.sh builds one) "
                "or put `somna` on the PATH"
            )
        self.startup_timeout = startup_timeout
        self.token = secrets.token_hex(16)
        self.url = None
        self.dir = None
        self.proc = None
        self.output = []  # the server's stdout lines

    def start(self, address="127.0.0.1:0"):
        """Starts the server on `address` (port 0: a free one), in a new directory unless it has
        one (a restart keeps the database)."""
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="somna-evennia-")
            with open(os.path.join(self.dir, "runtime.toml"), "w") as f:
                f.write(RUNTIME_TOML)
        self.url = None
        found = threading.Event()
        env = dict(os.environ, SOMNA_API_TOKEN=self.token, SOMNA_LOG="warn")
        env.pop("SOMNA_CONFIG", None)
        env.pop("SOMNA_DB", None)
        self.log = open(os.path.join(self.dir, "server.log"), "a")
        self.proc = subprocess.Popen(
            [self.binary, "run", "--serve", address, "--quiet"],
            cwd=self.dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )
        # Drain stdout in a thread (a full pipe would block the server) and catch the address.
        threading.Thread(target=self._read, args=(self.proc, found), daemon=True).start()
        if not found.wait(self.startup_timeout) or self.url is None:
            problem = f"somna run --serve printed no address: {self.output}, {self.read_log()}"
            self.stop()
            raise RuntimeError(problem)
        return self

    def _read(self, proc, found):
        for line in proc.stdout:
            self.output.append(line.rstrip("\n"))
            match = ADDRESS.match(line)
            if match and not found.is_set():
                self.url = match.group(1)
                found.set()
        found.set()  # exited (without an address, if it had printed none)

    def read_log(self):
        try:
            with open(os.path.join(self.dir, "server.log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, timeout=10.0, keep=False, kill=False):
        """Stops the server (SIGINT, then SIGKILL after `timeout`; `kill`: SIGKILL at once);
        removes its directory unless `keep` (or $SOMNA_KEEP_TEST_SERVER_DIR is set)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if getattr(self, "log", None):
            self.log.close()
            self.log = None
        if self.dir and not keep and not os.environ.get("SOMNA_KEEP_TEST_SERVER_DIR"):
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
