# The two front-door commands; everything else is meson, ninja and scripts/.
#   make run     install missing packages, build, serve on http://127.0.0.1:8080/mcp
#   make check   every test
#   make mutants break each promise in tests/mutations/ on purpose, check a test fails
#                (MUTATIONS="a b" for some; MUTANTS_SAMPLE=K for K of them)
# `make run ARGS=...` passes other options to `container-mcp serve`
# (with no --http/--socket option it serves MCP on stdin/stdout).

ARGS ?= --http 127.0.0.1:8080

.PHONY: all build run check mutants clean

all: build

build:
	@scripts/deps.sh
	@[ -f build/build.ninja ] || meson setup build >/dev/null
	@ninja -C build

run: build
	exec build/container-mcp serve $(ARGS)

check:
	@scripts/check.sh

mutants:
	@scripts/deps.sh --test
	@scripts/mutants.sh $(MUTATIONS)

clean:
	rm -rf build build-asan build-fuzz
