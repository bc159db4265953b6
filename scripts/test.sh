#!/usr/bin/env bash
# `make test`'s run: the whole suite, its output kept in .build/test.log. A failed run ends
# by repeating every failure line, since CI shows only the last part of the output and the
# failure itself is usually printed minutes before the summary.
set -uo pipefail
cd "$(dirname "$0")/.."

log=.build/test.log
mkdir -p .build
swift test --skip-build ${SWIFT_BUILD_FLAGS:-} "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    echo
    echo "==== swift test exited with $status; the failures, in order (whole output: $log) ===="
    # Swift Testing marks failures with ✘ (and an expectation's comment with ↳); XCTest,
    # the runtime and a test process that died write "error:" or "Fatal error".
    grep -E '^✘|^↳|error:|Fatal error' "$log" | grep -v '^✘ Test run with' | head -60 || true
    grep -E '^✘ Test run with' "$log" || echo "(the test process ended before its summary: killed or crashed)"
fi
exit "$status"
