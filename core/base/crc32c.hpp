// CRC32C (Castagnoli): the checksum of TensorBoard's TFRecord framing and of each
// variable in a checkpoint.
#pragma once
#include <cstdint>
#include <string_view>

namespace distrain {

// With the CPU's crc32 instruction where it has one (x86-64 with SSE 4.2), else the table.
uint32_t crc32c(std::string_view data);

// The table, a byte at a time: the fallback, and the reference the tests hold the other to.
uint32_t crc32c_portable(std::string_view data);

}  // namespace distrain
