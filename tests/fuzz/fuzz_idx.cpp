// libFuzzer target: the IDX reader's checks (datasets/idx.cpp) on the bytes of an image
// file and a label file. Input: a 4-byte little-endian length L, then L bytes of the
// image file, then the label file (L clamped to what is there).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/base/error.hpp"
#include "datasets/idx.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const size_t len = std::min<size_t>(uint32_t{data[0]} | uint32_t{data[1]} << 8 | uint32_t{data[2]} << 16 |
                                          uint32_t{data[3]} << 24,
                                      size - 4);
  const std::span<const uint8_t> images(data + 4, len), labels(data + 4 + len, size - 4 - len);
  try {
    (void)distrain::parse_idx(images, labels, "fuzz-images", "fuzz-labels");
  } catch (const distrain::UserError&) {
  }
  return 0;
}
