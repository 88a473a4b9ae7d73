# Thin wrapper over CMake (the source of truth).
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all build test deps clean

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j 1

# Debian 12 packages distrain builds and tests with (run as root).
deps:
	bash scripts/install-deps.sh

clean:
	rm -rf $(BUILD)
