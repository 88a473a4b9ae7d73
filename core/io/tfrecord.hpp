// TFRecord framing, the container of TensorBoard event files. Each record is
//   uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
// all little-endian, CRC32C being the Castagnoli CRC. Written and read here so that
// distrain writes TensorBoard's files without TensorFlow or protobuf.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/crc32c.hpp"

namespace distrain {

// TensorFlow stores CRCs masked, so that a CRC of data that embeds CRCs stays strong.
uint32_t masked_crc32c(std::string_view data);

// The bytes of one record holding `data`.
std::string tfrecord_frame(std::string_view data);

struct TFRecords {
  std::vector<std::string> records;
  bool truncated = false;  // the file ends inside a record (a crash while writing it)
};

// Every complete record of the file at `path`. A record cut short at the end is left
// out (truncated = true); a CRC mismatch is a UserError naming the file and the record.
TFRecords read_tfrecords(const std::string& path);

}  // namespace distrain
