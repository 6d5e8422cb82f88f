#!/usr/bin/env bash
# The cold `make demo` (issue 44): a fresh clone of a ref, an empty training cache, its own key directory and models
# cache (so the GGUF conversion, the training of both seeds, every evaluation and the gate all run), timed by
# /usr/bin/time -v, with the load average logged every 30 s beside it (the machine may be shared).
#
# Usage: bench/demo_cold.sh [REF] [--full]   (from a checkout with .venv; REF default HEAD; writes under $OUT,
# default /tmp/evalgate-demo-cold: clone/, cache/, demo.out, demo.err (the stage lines and bars), time.txt, load.txt)
# The clone uses this checkout's .venv (a symlink: nothing is installed) and runs `python -m evalgate.demo` as
# `make demo` does, without make's set-up step.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:-HEAD}
full=${2:-}
out=${OUT:-/tmp/evalgate-demo-cold}
rm -rf "$out" && mkdir -p "$out/cache" "$out/config"
git clone -q "$src" "$out/clone" && git -C "$out/clone" checkout -q "$(git -C "$src" rev-parse "$ref")"
ln -s "$(readlink -f "$src/.venv")" "$out/clone/.venv"
cd "$out/clone"
export PYTHONPATH="$out/clone" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export EVALGATE_CACHE="$out/cache" XDG_CONFIG_HOME="$out/config"
unset OMP_NUM_THREADS EVALGATE_MODELS EVALGATE_HOME
( while true; do echo "$(date +%T) $(cut -d' ' -f1-3 /proc/loadavg)"; sleep 30; done ) > "$out/load.txt" &
logger=$!
trap 'kill $logger' EXIT
/usr/bin/time -v -o "$out/time.txt" .venv/bin/python -m evalgate.demo $full > "$out/demo.out" 2> "$out/demo.err"
grep -E "Elapsed|User time|System time|Maximum resident" "$out/time.txt"
grep -E "^verdict after|^gate '|^demo wall" "$out/demo.out"
