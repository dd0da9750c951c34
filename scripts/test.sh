#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs lit.
#
#   scripts/test.sh              build into build/ and run every test
#   scripts/test.sh --no-build   run the suite of an existing build/ (a GPU
#                                machine without clang runs the prebuilt GPU tests)
#
# Without a GPU the GPU tests report UNSUPPORTED; everything else runs.
# Extra arguments after the options go to lit (e.g. a test path or --filter;
# `--param strategies=a,b` runs the GPU tests under those strategies only).
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
if [ "${1:-}" = "--no-build" ]; then
  build=0
  shift
fi

if [ $build = 1 ]; then
  scripts/install-deps.sh
  cmake -S . -B build -G Ninja
  cmake --build build -j"$(nproc)"
fi

results=build/lit-results.xml
status=0
python3 -c "import lit.main; lit.main.main()" -sv --timeout 1200 --xunit-xml-output "$results" "${@:-build/tests}" || status=$?
python3 tests/utils/summarize.py "$results"
exit $status
