# Entry points. `make run` and `make test` install what they need (Debian packages), build and run.
BUILD ?= build
JOBS ?= $(shell nproc)
# Sub-makes of the CMake build: no "Entering directory" noise around the output.
MAKEFLAGS += --no-print-directory
CMAKE_FLAGS ?=
# Ninja for a new build folder: with two cores, make's target-by-target order leaves one core idle for a
# good part of the build (measured 74 % busy); an existing folder keeps the generator it was made with.
GENERATOR = $(if $(wildcard $(BUILD)/CMakeCache.txt),,-G Ninja)
# Tests two at a time: most of them wait on processes, servers, a browser or cmake for part of their time.
TEST_JOBS ?= 2

.PHONY: all deps configure build run test clean deb fuzz-deps fuzz-build fuzz asan

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release -DDIFFNET_REQUIRE_OPTIONAL=ON $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Detect tampering in the bundled example documents with the shipped default weights.
run: build
	@$(BUILD)/diffnet predict examples --out out/examples --table

# Build and run the whole test suite.
test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS)

clean:
	rm -rf $(BUILD)

# Fuzzing (docs/fuzz.md): libFuzzer + ASan + UBSan binaries of fuzz/ built with clang-14 in build-fuzz
# (only the modules the targets need), each run for FUZZ_SECONDS on fuzz/corpus/<target> (read-only:
# new inputs go to build-fuzz/new-corpus/<target>, crashes to build-fuzz/artifacts/<target>/).
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= $(patsubst fuzz/fuzz_%.cpp,%,$(sort $(wildcard fuzz/fuzz_*.cpp)))
FUZZ_JOBS ?= 1
# Empty for a throughput build without sanitizers (use another FUZZ_BUILD; docs/fuzz.md).
FUZZ_SANITIZERS ?= address,undefined
fuzz-deps:
	@scripts/install-deps.sh --fuzz

fuzz-build: fuzz-deps
	@CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDIFFNET_FUZZ=ON \
	  -DDIFFNET_FUZZ_SANITIZERS="$(FUZZ_SANITIZERS)" >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(FUZZ_JOBS)

# LibTorch's globals are reported by LeakSanitizer at exit: leaks are off (detect_leaks=0).
FUZZ_NICE ?= 19
fuzz: SHELL := /bin/bash
fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/new-corpus/$$t $(FUZZ_BUILD)/artifacts/$$t; \
	  echo "== fuzz_$$t: $(FUZZ_SECONDS) s"; \
	  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 nice -n $(FUZZ_NICE) $(FUZZ_BUILD)/fuzz_$$t \
	    -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_BUILD)/artifacts/$$t/ $$(test -f fuzz/dict/$$t.dict && echo -dict=fuzz/dict/$$t.dict) \
	    $(FUZZ_BUILD)/new-corpus/$$t fuzz/corpus/$$t fuzz/crashes/$$t \
	    2>&1 | grep -E '^#[0-9]+\s+DONE|^==[0-9]+==ERROR|^SUMMARY|runtime error|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|Test unit written'; \
	  rc=$${PIPESTATUS[0]}; test "$$rc" = 0 || { echo "fuzz_$$t: finding, see $(FUZZ_BUILD)/artifacts/$$t/"; exit 1; }; \
	done

# The io and serve tests (and the fuzz corpus replay) under AddressSanitizer + UndefinedBehaviorSanitizer
# (gcc, build-asan). Leaks are off for the same reason as above.
ASAN_BUILD ?= build-asan
ASAN_TESTS ?= io serve fuzz_replay
empty :=
space := $(empty) $(empty)
asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDIFFNET_SANITIZE=ON -DDIFFNET_NATIVE=OFF >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) --target diffnet $(foreach t,$(ASAN_TESTS),$(if $(filter fuzz_replay,$(t)),test_fuzz_replay,test_$(t)))
	@cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure -j 1 -R '^($(subst $(space),|,$(strip $(ASAN_TESTS))))$$'

# A Debian package of the built tree (cmake/packaging.cmake): build/diffnet_<version>_amd64.deb.
# Refused for a -DDIFFNET_NATIVE=ON build: its code is compiled for this machine's CPU alone, and the package
# would stop with SIGILL on others (the default build runs on any x86-64 CPU: include/diffnet/cpu_isa.h).
deb: build
	@if grep -q '^DIFFNET_NATIVE:BOOL=ON' $(BUILD)/CMakeCache.txt; then \
	  echo "make deb: $(BUILD) was configured with -DDIFFNET_NATIVE=ON (runs only on CPUs like this one); reconfigure it with -DDIFFNET_NATIVE=OFF" >&2; exit 2; fi
	@cd $(BUILD) && cpack -G DEB
