#!/usr/bin/env bash
# Tests the Python client (clients/python) against real servers: pytest runs
# clients/python/tests, whose fixtures start `somna run --serve` on loopback (offline builtin
# model, a temporary data directory each, a bearer token set so that the auth path is exercised),
# kill and restart them under open event streams, and hold the client's result types, requests
# and event types to the OpenAPI document the server serves.
#
#   scripts/test-python-client.sh [PYTEST_ARGS...]   build somna (debug), set up the venv, test
#
# SOMNA_BIN=/path/to/somna tests that binary instead of building one. The venv lives in
# $SOMNA_PY_VENV (default target/python-client-venv): made once, with pytest and the build
# backend pinned; the client is reinstalled from the working tree on every run (offline once the
# venv exists). Needs python3 3.9 or newer with venv, and PyPI the first time. Exit status:
# pytest's.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTEST=pytest==8.4.2
HATCHLING=hatchling==1.27.0
VENV=$(realpath -m "${SOMNA_PY_VENV:-target/python-client-venv}")

say() { printf 'test-python-client: %s\n' "$*" >&2; }
die() {
    printf 'test-python-client: error: %s\n' "$*" >&2
    exit 1
}

# The server: the binary under test.
# shellcheck source=lib/somna-bin.sh
source scripts/lib/somna-bin.sh
somna=$(somna_bin)

# The venv: pytest and the build backend, pinned, installed once.
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' ||
    die "python3 is $(python3 -V 2>&1); the client needs 3.9 or newer"
if ! "$VENV/bin/python" -m pytest --version 2>&1 | grep -qF "${PYTEST#*==}" ||
    ! "$VENV/bin/pip" show --quiet hatchling 2>/dev/null; then
    say "installing $PYTEST and $HATCHLING into $VENV"
    python3 -m venv "$VENV" ||
        die "cannot make a venv with python3 (on Debian: apt-get install python3-venv)"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check "$PYTEST" "$HATCHLING" ||
        die "cannot install $PYTEST and $HATCHLING from PyPI"
fi
# The client, from the working tree, every run (pip reinstalls a directory; the dependencies come
# from PyPI the first time only, the build backend is the venv's).
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-build-isolation ./clients/python ||
    die "cannot install clients/python"
say "$("$VENV/bin/python" -m pytest --version 2>&1), $("$VENV/bin/python" -c \
    'import httpx, somna; print(f"somna {somna.__version__}, httpx {httpx.__version__}")'), $somna"

# The run. Nothing is left in the working tree: no bytecode, no pytest cache.
started=$(date +%s)
status=0
SOMNA_BIN="$somna" PYTHONDONTWRITEBYTECODE=1 "$VENV/bin/python" -m pytest -p no:cacheprovider \
    clients/python/tests "$@" || status=$?
say "pytest took $(($(date +%s) - started)) s (exit $status)"
exit "$status"
