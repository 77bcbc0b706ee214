# kvtier: every entry point a user or CI needs. See README.md.
BUILD ?= build
JOBS ?= $(shell nproc)
PY := /usr/bin/python3
CMAKE_FLAGS ?= -DPython_EXECUTABLE=$(PY) -DCMAKE_BUILD_TYPE=RelWithDebInfo
FUZZ_SECONDS ?= 60
# Length of `make soak` (tests/soak/soak.py), in minutes; fractions allowed.
SOAK_MINUTES ?= 30
# Sanitizer runs of `make test` (scripts/sanitize.sh): all, asan, tsan or none.
SANITIZERS ?= all
# The ctest names `make test-long` runs (a regex).
LONG_TESTS ?= ^(store_multihost_tests|store_failover_tests|StoreFailoverAtScale\..*|StoreFailoverKill\..*|ObjectShardsTest\.TenMillionObjectsFitTheBudget)$$

.PHONY: all deps test-deps test-build build test test-engines test-long run bench soak fuzz clean

all: build

# Debian packages by purpose: `deps` only what building and running the demo needs, `test-deps`
# also what the tests, benches and the engine suite use (scripts/install-deps.sh).
deps:
	scripts/install-deps.sh run

test-deps:
	scripts/install-deps.sh test

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Configures again after test-deps, so a build tree that `make run` made gains the test targets.
test-build: test-deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	$(MAKE) build

test: test-build
	scripts/check-format.sh
	cd $(BUILD) && ctest --output-on-failure -j 2 --timeout 900
ifneq ($(SANITIZERS),none)
	BUILD=$(BUILD) JOBS=$(JOBS) scripts/sanitize.sh $(SANITIZERS)
endif

# The real vLLM, SGLang, LMCache and Mooncake packages driving kvtier (tests/engines/). Needs the
# Python package index once, to fill the venv that scripts/engines-venv.sh keeps outside the clone.
# ENGINES="vllm sglang" picks engines.
test-engines: test-build
	$$(scripts/engines-venv.sh)/bin/python tests/engines/run.py $(BUILD)

# Not part of `make test`: the long variants (more and larger objects, longer faults) of the tests
# that read KVTIER_LONG (docs/RELIABILITY.md).
test-long: test-build
	cd $(BUILD) && KVTIER_LONG=1 ctest --output-on-failure --timeout 3600 -R '$(LONG_TESTS)'

# Only what the demo needs: its packages, the binary and the Python module (no test binaries),
# with their output in $(BUILD)/logs (scripts/run.sh).
run:
	@BUILD=$(BUILD) JOBS=$(JOBS) CMAKE_FLAGS="$(CMAKE_FLAGS)" scripts/run.sh

# Prints every bench and saves the reports and their tables in $(BUILD) (bench-tables.md); the doc
# is left alone. bench-docs then puts those tables into docs/BENCHMARKS.md's marked region.
bench: test-build
	scripts/bench.sh

.PHONY: bench-docs
bench-docs:
	$(PY) bench/markdown.py --write-doc docs/BENCHMARKS.md $(BUILD)

# Not part of `make test`: one server under trace replays for SOAK_MINUTES (docs/RELIABILITY.md).
soak: test-build
	BUILD=$(BUILD) $(PY) tests/soak/soak.py --minutes $(SOAK_MINUTES)

fuzz:
	scripts/install-deps.sh fuzz
	scripts/fuzz.sh $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD)
