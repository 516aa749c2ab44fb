#!/usr/bin/env bash
# The Evennia integration's tests (examples/evennia/): Evennia's own test runner (`evennia test`,
# tests on Evennia's EvenniaTest) in a throwaway game dir made with `evennia --init`, against a
# real `somna run --serve` (loopback, a bearer token, the offline builtin model) that the tests
# start themselves from $SOMNA_BIN. A character says something, the NPC answers in the room; room
# events become observations; the NPC's thresholds reach its agent; `@somna/compact` and
# `@somna/sleep` show up in the agent's status, journal and event log.
#
#   scripts/test-evennia.sh             build `somna` (debug), set up the venv, run the tests
#   scripts/test-evennia.sh -v 2        the same, with the runner's verbosity (any `evennia test` option)
#
# SOMNA_BIN=path uses that binary instead of building one. The venv lives in $SOMNA_EVENNIA_VENV
# (default target/evennia-venv; made once, reused): evennia (pinned below, its dependencies pinned
# by examples/evennia/constraints.txt) from PyPI, and the Python client of this checkout
# (./clients/python, installed again when its files change). The game dir is made anew in
# target/evennia-game every run. Needs python3 3.11 or newer (Evennia 5 does; Evennia 6 needs
# 3.12) with venv, and PyPI the first time. The exit status is the tests'.
set -euo pipefail
cd "$(dirname "$0")/.."

EVENNIA=evennia==5.0.1
CONSTRAINTS=examples/evennia/constraints.txt
VENV=$(realpath -m "${SOMNA_EVENNIA_VENV:-target/evennia-venv}")
GAME=$PWD/target/evennia-game

say() { printf 'test-evennia: %s\n' "$*" >&2; }
die() {
    printf 'test-evennia: error: %s\n' "$*" >&2
    exit 1
}

# The somna binary.
# shellcheck source=lib/somna-bin.sh
source scripts/lib/somna-bin.sh
somna=$(somna_bin)

# The venv: Evennia once (again when the pin or the constraints change).
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
    die "$(python3 --version) is too old: Evennia ${EVENNIA#*==} needs Python 3.11 or newer"
pip=("$VENV/bin/pip" --disable-pip-version-check)
wanted=$( (echo "$EVENNIA" && cat "$CONSTRAINTS") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$VENV/.somna-evennia" 2>/dev/null)" != "$wanted" ]; then
    say "installing $EVENNIA into $VENV"
    python3 -m venv "$VENV" || die "cannot make a venv with python3 (on Debian: apt-get install python3-venv)"
    "${pip[@]}" install --quiet -c "$CONSTRAINTS" "$EVENNIA" || die "cannot install $EVENNIA from PyPI"
    echo "$wanted" >"$VENV/.somna-evennia"
    rm -f "$VENV/.somna-client"
fi
# The client of this checkout, again whenever its files changed since the venv got it.
client=$(find clients/python/pyproject.toml clients/python/src -type f ! -name '*.pyc' | LC_ALL=C sort |
    xargs sha256sum | sha256sum | cut -d' ' -f1)
if [ "$(cat "$VENV/.somna-client" 2>/dev/null)" != "$client" ]; then
    say "installing the Python client from clients/python"
    "${pip[@]}" uninstall --quiet --yes somna-client >/dev/null 2>&1 || true
    "${pip[@]}" install --quiet -c "$CONSTRAINTS" ./clients/python || die "cannot install clients/python"
    echo "$client" >"$VENV/.somna-client"
fi
say "evennia $("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("evennia"))'), $("$VENV/bin/python" --version)"

# A throwaway game dir with the example wired in as a game would do it (README.md).
rm -rf "$GAME"
mkdir -p "$(dirname "$GAME")"
(cd "$(dirname "$GAME")" && "$VENV/bin/evennia" --init "$(basename "$GAME")" >/dev/null) ||
    die "evennia --init failed"
ln -s "$PWD/examples/evennia/somna_npc" "$GAME/somna_npc"
cat >>"$GAME/server/conf/settings.py" <<'EOF'

######################################################################
# Somna NPCs (examples/evennia/somna_npc); the tests point these at their own server.
######################################################################
SOMNA_URL = "http://127.0.0.1:7878"
SOMNA_TOKEN = None
EOF
say "evennia test --settings settings.py somna_npc (somna: $somna)"
started=$(date +%s)
status=0
(cd "$GAME" && SOMNA_BIN="$somna" PYTHONDONTWRITEBYTECODE=1 \
    "$VENV/bin/evennia" test --settings settings.py "$@" somna_npc) || status=$?
say "the tests took $(($(date +%s) - started)) s (exit $status)"
exit $status
