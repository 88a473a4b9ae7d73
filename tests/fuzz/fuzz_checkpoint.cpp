// libFuzzer target fuzz_checkpoint: see checkpoint_input in fuzz_inputs.hpp.
#include "tests/fuzz/fuzz_inputs.hpp"

#include <cstdlib>

// DISTRAIN_FUZZ_WRITE_SEED=FILE: write the seed checkpoint and exit (scripts/fuzz.sh --seed).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* out = std::getenv("DISTRAIN_FUZZ_WRITE_SEED")) {
    distrain::fuzz::write_checkpoint_seed(out);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distrain::fuzz::checkpoint_input({data, size});
  return 0;
}
