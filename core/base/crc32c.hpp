// CRC32C (Castagnoli): the checksum of TensorBoard's TFRecord framing and of each
// variable in a checkpoint.
#pragma once
#include <cstdint>
#include <string_view>

namespace distrain {

uint32_t crc32c(std::string_view data);

}  // namespace distrain
