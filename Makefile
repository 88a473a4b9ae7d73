# Thin wrapper over CMake (the source of truth).
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all build test deps bundle clean

all: build

# What a run needs: the executable (and the CUDA plugin where the toolkit is); the test
# binaries are built by `make test`.
build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS) --target shipped

test:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j 1

# dist/distrain-<version>-linux-<arch>.tar.gz: the executable and the libraries it needs.
# Builds only what ships (the executable and the CUDA plugin), not the tests.
bundle:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS) --target shipped
	bash scripts/make-bundle.sh $(BUILD) dist

# Debian 12 packages distrain builds and tests with (run as root).
deps:
	bash scripts/install-deps.sh

clean:
	rm -rf $(BUILD)
