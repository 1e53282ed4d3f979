#!/usr/bin/env bash
# End-to-end tests of container-mcp with the official MCP SDK client.
#
#   tests/e2e/run.sh [extra node --test args]
#
# CONTAINER_MCP_BIN  the binary under test (default: build/container-mcp,
#                    relative to the repository root)
# E2E_CONCURRENCY    test files run at once (default 1)
# Exits non-zero when any test fails; node's "# pass N" / "# fail N" summary
# is printed as is.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"

bin="${CONTAINER_MCP_BIN:-build/container-mcp}"
case "$bin" in
/*) ;;
*) bin="$root/$bin" ;;
esac
if [[ ! -x "$bin" ]]; then
        echo "e2e: $bin is missing or not executable; build first (ninja -C build)" >&2
        exit 1
fi
export CONTAINER_MCP_BIN="$bin"

if ! command -v node >/dev/null 2>&1; then
        echo "e2e: node is not installed (apt-get install nodejs npm)" >&2
        exit 1
fi

cd "$here"
# Install when node_modules is missing or older than the lock file.
if [[ ! -d node_modules/@modelcontextprotocol/sdk || ! -d node_modules/undici ||
        package-lock.json -nt node_modules/.package-lock.json ]]; then
        npm ci --no-audit --no-fund --loglevel=error
fi

shopt -s nullglob
files=(./*.test.mjs)
if ((${#files[@]} == 0)); then
        echo "e2e: no test files" >&2
        exit 1
fi

exec node --test --test-concurrency="${E2E_CONCURRENCY:-1}" --test-reporter=tap \
        --test-reporter-destination=stdout "$@" "${files[@]}"
