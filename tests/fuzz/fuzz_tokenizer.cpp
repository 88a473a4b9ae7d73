// libFuzzer target fuzz_tokenizer: see tokenizer_input in fuzz_inputs.hpp.
#include "tests/fuzz/fuzz_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distrain::fuzz::tokenizer_input({data, size});
  return 0;
}
