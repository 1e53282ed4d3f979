# The two front-door commands; everything else is meson, ninja and scripts/.
#   make run     install missing packages, build, serve on http://127.0.0.1:8080/mcp
#   make check   every test
# `make run ARGS=...` passes other options to `container-mcp serve`
# (with no --http/--socket option it serves MCP on stdin/stdout).

ARGS ?= --http 127.0.0.1:8080

.PHONY: all build run check clean

all: build

build:
	@scripts/deps.sh
	@[ -f build/build.ninja ] || meson setup build >/dev/null
	@ninja -C build

run: build
	exec build/container-mcp serve $(ARGS)

check:
	@scripts/check.sh

clean:
	rm -rf build build-asan build-fuzz
