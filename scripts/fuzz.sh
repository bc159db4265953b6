#!/usr/bin/env bash
# Builds the libFuzzer targets of Fuzz/ and runs each for a bounded time.
#
#   scripts/fuzz.sh                   # every target below, FUZZ_SECONDS each
#   scripts/fuzz.sh FuzzPhotoHeader   # only the targets named
#   FUZZ_SECONDS=600 scripts/fuzz.sh  # longer runs
#   FUZZ_FLAGS="-max_len=4096" scripts/fuzz.sh   # extra libFuzzer flags
#
# The corpus of each target grows under .build-fuzz/corpus/<target> (kept
# between runs, ignored by git) and starts from the seed directory named
# below. A crash, sanitizer report, timeout or out-of-memory leaves its input
# under .build-fuzz/artifacts/<target>/; the script prints that path and exits
# non-zero. Replay one with: Fuzz/.build/release/<target> <file>
set -euo pipefail

# One line per target: name=seed directory (relative to the repository root;
# empty for none).
TARGETS=(
    "FuzzPhotoHeader=Jobs/demo/photos"
    "FuzzImportLine=Fuzz/Seeds/FuzzImportLine"
)

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_FLAGS=${FUZZ_FLAGS:-}

cd "$(dirname "$0")/.."
root=$(pwd)
work="$root/.build-fuzz"

seed_dir() {
    local entry
    for entry in "${TARGETS[@]}"; do
        if [[ "${entry%%=*}" == "$1" ]]; then
            printf '%s\n' "${entry#*=}"
            return 0
        fi
    done
    return 1
}

selected=()
if [[ $# -gt 0 ]]; then
    for name in "$@"; do
        if ! seed_dir "$name" >/dev/null; then
            echo "unknown fuzz target $name (known: ${TARGETS[*]%%=*})" >&2
            exit 2
        fi
        selected+=("$name")
    done
else
    for entry in "${TARGETS[@]}"; do selected+=("${entry%%=*}"); done
fi

# -sanitize=fuzzer instruments the Swift code for coverage and links
# libFuzzer; address adds AddressSanitizer (Swift's own checks already trap
# on overflow and out-of-range access, ASan catches what unsafe pointers do).
echo "building fuzz targets (release, -sanitize=fuzzer,address)"
swift build --package-path Fuzz -c release -Xswiftc -sanitize=fuzzer,address
bin=$(swift build --package-path Fuzz -c release -Xswiftc -sanitize=fuzzer,address --show-bin-path)

failed=()
summary=()
for target in "${selected[@]}"; do
    corpus="$work/corpus/$target"
    artifacts="$work/artifacts/$target"
    log="$work/logs/$target.log"
    mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
    seeds=$(seed_dir "$target")
    if [[ -n "$seeds" ]]; then
        # -n: corpus entries libFuzzer already minimised or kept stay as they are.
        find "$seeds" -maxdepth 1 -type f -exec cp -n {} "$corpus/" \;
    fi
    marker=$(mktemp)

    echo "fuzzing $target for ${FUZZ_SECONDS}s (corpus $corpus)"
    set +e
    # -timeout: one input taking over 10 s is a hang worth a report.
    # shellcheck disable=SC2086 # FUZZ_FLAGS is a list of flags
    "$bin/$target" "$corpus" \
        -max_total_time="$FUZZ_SECONDS" \
        -timeout=10 \
        -print_final_stats=1 \
        -artifact_prefix="$artifacts/" \
        $FUZZ_FLAGS 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    set -e

    executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    new_artifacts=$(find "$artifacts" -type f -newer "$marker" | sort)
    rm -f "$marker"
    summary+=("$target: ${executions:-unknown} executions in ${FUZZ_SECONDS}s, exit status $status")
    if [[ $status -ne 0 || -n "$new_artifacts" ]]; then
        failed+=("$target")
        echo "$target FAILED (exit status $status); inputs that triggered it:"
        if [[ -n "$new_artifacts" ]]; then
            sed 's/^/  /' <<<"$new_artifacts"
        else
            echo "  (none written; see $log)"
        fi
    fi
done

echo
echo "fuzzing summary:"
printf '  %s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "failing targets: ${failed[*]}" >&2
    exit 1
fi
