// What the machine can still give this process, for checks made before allocating.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace distrain {

// MemAvailable of /proc/meminfo in bytes (what the kernel estimates can be allocated
// without swapping); nullopt where it cannot be read (not Linux, a sandbox without /proc).
std::optional<int64_t> available_host_memory();

// "296.1 TB", "1.50 GiB": a byte count for messages.
std::string format_bytes(int64_t bytes);
// Bytes in MiB, the one unit `check` prints sizes in: two decimals, or three significant
// digits below 0.01 MiB (a small pipeline stage's few hundred bytes stay visible).
std::string format_mib(int64_t bytes);
// "2GiB", "512 MiB", "1.5GB", "4096": a byte count from a recipe or flag (binary units
// KiB..TiB, decimal kB..TB, bytes without a unit); nullopt for anything else, a negative
// count, one past INT64_MAX, or a positive one below a byte.
std::optional<int64_t> parse_byte_count(const std::string& text);

}  // namespace distrain
