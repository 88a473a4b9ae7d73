// libFuzzer target fuzz_safetensors: see safetensors_input in fuzz_inputs.hpp.
#include "tests/fuzz/fuzz_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distrain::fuzz::safetensors_input({data, size});
  return 0;
}
