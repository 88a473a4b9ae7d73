// libFuzzer target fuzz_images: see image_input in fuzz_inputs.hpp.
#include "tests/fuzz/fuzz_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distrain::fuzz::image_input({data, size});
  return 0;
}
