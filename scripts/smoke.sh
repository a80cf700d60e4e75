#!/usr/bin/env bash
# Smoke test of an installed dse: --version, one estimate, one tiny sweep, one listing, and
# the README's first command (the llama70b study, from this checkout's studies/ file).
#   scripts/smoke.sh [VENV]     (VENV/bin/dse; default: the `dse` on PATH)
# Runs from a scratch directory so the installed package, not the source tree, is used.
set -euo pipefail
if [ $# -ge 1 ]; then DSE="$(cd "$1" && pwd)/bin/dse"; else DSE="$(command -v dse)"; fi
[ -x "$DSE" ] || { echo "smoke: no dse executable at '$DSE'" >&2; exit 1; }
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export JAX_PLATFORMS=cpu

step() { echo "+ dse $*"; "$DSE" "$@" > out.txt 2>&1 || { cat out.txt; echo "smoke: FAILED: dse $*" >&2; exit 1; }; }
expect() { grep -q -- "$1" out.txt || { cat out.txt; echo "smoke: FAILED: output lacks '$1'" >&2; exit 1; }; }

step --version;                 expect "^dse "
cat out.txt
step estimate --model llama3-8b --hardware h100-sxm-80gb --gpus 8 --tp 2 --global-batch 64 --seq 4096
expect "step time";             expect "fits"
step sweep --model llama3-8b --hardware h100-sxm-80gb --gpus 8 --global-batch 32 --seq 2048 --top 3
expect "step_s"
step list models;               expect "llama3-8b"
step study "$repo/studies/llama70b.toml";  expect "results/llama70b"
[ -s results/llama70b/report.md ] && [ -s results/llama70b/report.html ] \
  || { echo "smoke: FAILED: the llama70b study wrote no report" >&2; exit 1; }
set +e; "$DSE" > out.txt 2>&1; rc=$?; set -e
[ "$rc" -eq 2 ] && expect "usage: dse" || { cat out.txt; echo "smoke: FAILED: bare dse exited $rc, not 2" >&2; exit 1; }
echo "smoke: ok ($("$DSE" --version), $("$(dirname "$DSE")/python" -V 2>&1 || python3 -V))"
