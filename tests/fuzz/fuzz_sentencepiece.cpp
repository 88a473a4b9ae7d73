// libFuzzer target fuzz_sentencepiece: see sentencepiece_input in fuzz_inputs.hpp. The
// plugin is found through DISTRAIN_SENTENCEPIECE_PLUGIN (scripts/fuzz.sh sets it).
#include "tests/fuzz/fuzz_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distrain::fuzz::sentencepiece_input({data, size});
  return 0;
}
