// libFuzzer target fuzz_checkpoint_bytes: the input bytes as a checkpoint file
// (checkpoint_file_input in fuzz_inputs.hpp). Not run in CI: it mostly finds bugs in
// HDF5's own parser of corrupt files (Debian's libhdf5 1.10.8 overflows its heap on
// some), which distrain cannot fix. Run it by hand: build-fuzz/fuzz_checkpoint_bytes DIR.
#include "tests/fuzz/fuzz_inputs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  distrain::fuzz::checkpoint_file_input({data, size});
  return 0;
}
