#!/usr/bin/env bash
# The release binary, as deployed and as benchmarked: Swift's runtime and Foundation
# linked in statically (nothing to install beside the Debian C libraries, and less
# dynamic linking at every start, which a per-photo or per-cron-run process pays),
# through lld, which does not repeat glibc's link-time notes about mktemp in the
# static Foundation.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product lifecycle --static-swift-stdlib -Xswiftc -use-ld=lld "$@"
