// libFuzzer target fuzz_idx: see idx_input in fuzz_inputs.hpp.
#include "tests/fuzz/fuzz_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distrain::fuzz::idx_input({data, size});
  return 0;
}
