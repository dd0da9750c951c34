#!/usr/bin/env bash
# The main job: build gpualloc, compile the bundled example
# (examples/divisors.cu, an unmodified CUDA program) with gpualloc-clang++,
# and run it under every registered strategy, printing a table.
#
#   scripts/demo.sh              build, then run where a GPU is
#   scripts/demo.sh --no-build   run an existing build/ (a GPU machine without clang)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" != "--no-build" ]; then
  scripts/install-deps.sh
  cmake -S . -B build -G Ninja
  cmake --build build -j"$(nproc)"
fi

example=build/examples/divisors
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "demo: built $example; no GPU on this machine."
  echo "demo: copy the repository with build/ to a GPU machine and run scripts/demo.sh --no-build there."
  exit 0
fi

printf '%-14s %-18s %-18s %s\n' strategy "allocating kernel" "freeing kernel" "statistics (GPUALLOC_STATS=1)"
for strategy in $(build/bin/gpualloc-info --names); do
  log=$(mktemp)
  if GPUALLOC_STRATEGY=$strategy GPUALLOC_STATS=1 timeout 300 "$example" >"$log" 2>&1; then
    alloc=$(sed -n 's/.*allocating kernel \([0-9.]* ms\).*/\1/p' "$log")
    free=$(sed -n 's/.*freeing kernel \([0-9.]* ms\).*/\1/p' "$log")
    # The statistics row: gpualloc: <ctx> <device> <strategy> <heap> <unit> <mallocs> <frees> <failed> <peak> <unit> ...
    stats=$(grep -A2 'statistics at exit' "$log" | tail -n 1 |
      awk '{printf "heap %s %s, %s mallocs, %s frees, %s failed, peak %s %s", $5, $6, $7, $8, $9, $10, $11}')
    printf '%-14s %-18s %-18s %s\n' "$strategy" "$alloc" "$free" "$stats"
  else
    printf '%-14s failed: %s\n' "$strategy" "$(tail -n 1 "$log")"
  fi
  rm -f "$log"
done
