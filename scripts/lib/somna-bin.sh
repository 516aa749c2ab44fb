# Sourced by the scripts that test a running `somna` (fuzz-api.sh, test-python-client.sh,
# test-evennia.sh); they define `say` and `die` first and run from the repository's root.
#
# somna_bin: prints the path of the somna binary to test — $SOMNA_BIN when set (e.g. by .ci/run:
# the binary its tests built), or else a debug build of somna-cli made now — and fails (through
# `die`) when there is no executable there.
somna_bin() {
    local somna
    if [ -n "${SOMNA_BIN:-}" ]; then
        somna=$(realpath -m "$SOMNA_BIN")
    else
        say "building somna (cargo build -p somna-cli)"
        cargo build --quiet --locked -p somna-cli --bin somna || die "cannot build the somna binary"
        somna=$(cargo metadata --format-version 1 --no-deps |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/debug/somna
    fi
    [ -x "$somna" ] || die "no somna binary at $somna"
    printf '%s\n' "$somna"
}
