# Entry points. `make run` and `make test` install what they need (Debian packages), build and run.
BUILD ?= build
JOBS ?= $(shell nproc)
# Sub-makes of the CMake build: no "Entering directory" noise around the output.
MAKEFLAGS += --no-print-directory
CMAKE_FLAGS ?=

.PHONY: all deps configure build run test clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# Detect tampering in the bundled example documents with the shipped default weights.
run: build
	@$(BUILD)/diffnet predict examples --out out/examples --table

# Build and run the whole test suite.
test: build
	@cd $(BUILD) && ctest --output-on-failure -j 1

clean:
	rm -rf $(BUILD)
