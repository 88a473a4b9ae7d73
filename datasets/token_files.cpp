#include "datasets/token_files.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"
#include "datasets/dataset.hpp"

namespace distrain {

namespace {

constexpr int32_t kLlmcMagic = 20240520;         // llm.c's GPT-2 token files
constexpr int32_t kLlmcLlama3Magic = 20240801;   // llm.c's LLaMA 3 files (uint32 ids): not read
constexpr size_t kHeaderBytes = 256 * 4;

uint32_t le32(std::span<const uint8_t> d, size_t at) {
  return uint32_t{d[at]} | (uint32_t{d[at + 1]} << 8) | (uint32_t{d[at + 2]} << 16) | (uint32_t{d[at + 3]} << 24);
}

int32_t header_field(std::span<const uint8_t> d, size_t index) { return static_cast<int32_t>(le32(d, 4 * index)); }

// A header in all but the magic: version 1 and a token count that fits the file exactly.
bool header_like(std::span<const uint8_t> d) {
  return d.size() >= kHeaderBytes && header_field(d, 1) == 1 && header_field(d, 2) >= 0 &&
         kHeaderBytes + 2 * static_cast<size_t>(header_field(d, 2)) == d.size();
}

// The ids after the header (the whole file for a raw one): uint16, each below vocab_size.
std::vector<int32_t> read_ids(std::span<const uint8_t> d, size_t from, int64_t vocab_size, const std::string& path) {
  std::vector<int32_t> ids((d.size() - from) / 2);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = d[from + 2 * i] | (d[from + 2 * i + 1] << 8);
    DT_USER_CHECK(id < vocab_size, "{}: token {} at position {} is not below data.vocab_size = {}", path, id, i, vocab_size);
    ids[i] = id;
  }
  return ids;
}

// A file that starts with llm.c's magic but whose header does not hold up may be a raw
// one whose first two ids spell it: say so, and how to read it as raw.
std::vector<int32_t> parse_llmc(std::span<const uint8_t> d, int64_t vocab_size, const std::string& path, bool told) {
  const std::string raw_hint = told ? "" : fmt::format("; if it is a raw file of uint16 ids whose first two are {} and {}, set "
                                                       "data.token_format = \"raw\"", kLlmcMagic & 0xffff, kLlmcMagic >> 16);
  DT_USER_CHECK(d.size() >= kHeaderBytes, "{}: starts with llm.c's magic {} but has {} bytes, fewer than its {}-byte header "
                "(truncated?){}", path, kLlmcMagic, d.size(), kHeaderBytes, raw_hint);
  DT_USER_CHECK(header_field(d, 1) == 1, "{}: starts with llm.c's magic {}, but its header's version is {}; distrain reads "
                "version 1 (uint16 GPT-2 ids){}", path, kLlmcMagic, header_field(d, 1), raw_hint);
  const int64_t count = header_field(d, 2);
  const auto held = static_cast<int64_t>(d.size() - kHeaderBytes);
  DT_USER_CHECK(count >= 0 && held == 2 * count, "{}: the header says {} tokens but {} bytes follow it ({} tokens){}{}", path,
                count, held, held / 2, held < 2 * count ? " (truncated?)" : "", raw_hint);
  return read_ids(d, kHeaderBytes, vocab_size, path);
}

}  // namespace

std::vector<int32_t> parse_token_file(std::span<const uint8_t> d, int64_t vocab_size, const std::string& path,
                                      const std::string& format) {
  const int32_t magic = d.size() >= 4 ? static_cast<int32_t>(le32(d, 0)) : 0;
  if (format == "llmc") {
    DT_USER_CHECK(magic == kLlmcMagic, "{}: no llm.c header (magic {}, expected {}), as data.token_format = \"llmc\" says",
                  path, magic, kLlmcMagic);
    return parse_llmc(d, vocab_size, path, true);
  }
  if (format == "raw") {
    DT_USER_CHECK(d.size() % 2 == 0, "{}: {} bytes, an odd length; a raw token file is little-endian uint16 ids", path,
                  d.size());
    return read_ids(d, 0, vocab_size, path);
  }
  if (magic == kLlmcMagic) return parse_llmc(d, vocab_size, path, false);
  DT_USER_CHECK(magic != kLlmcLlama3Magic, "{}: llm.c's LLaMA 3 token file (magic {}, uint32 ids); distrain reads GPT-2 "
                "files (magic {}, uint16 ids) or raw uint16 ids", path, kLlmcLlama3Magic, kLlmcMagic);
  DT_USER_CHECK(!header_like(d), "{}: an llm.c header (version 1, {} tokens) with magic {}, expected {}; the file is "
                "corrupt or of another format", path, header_field(d, 2), magic, kLlmcMagic);
  DT_USER_CHECK(d.size() % 2 == 0, "{}: {} bytes, an odd length; a raw token file is little-endian uint16 ids (nanoGPT) "
                "and an llm.c file starts with magic {}", path, d.size(), kLlmcMagic);
  return read_ids(d, 0, vocab_size, path);
}

std::vector<int32_t> read_token_file(const std::string& path, int64_t vocab_size, const std::string& key,
                                     const std::string& format) {
  std::error_code ec;
  DT_USER_CHECK(!std::filesystem::is_directory(path, ec), "{}: a folder, not a token file ({})", path, key);
  const std::string problem = not_a_file(path);
  DT_USER_CHECK(problem.empty(), "{}: {} ({}){}", path, problem, key, problem == "not found" ? relative_note(path) : "");
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  DT_USER_CHECK(!ec, "{}: cannot read its size ({}) ({})", path, ec.message(), key);
  const std::optional<int64_t> available = available_host_memory();
  // Held as bytes, then as int32 ids: three times the file.
  DT_USER_CHECK(!available || 3 * size <= *available, "{}: {} of tokens need {} in memory, more than the {} free",
                path, format_bytes(size), format_bytes(3 * size), format_bytes(*available));
  std::ifstream in(path, std::ios::binary);
  DT_USER_CHECK(in, "{}: cannot open ({}) ({})", path, std::strerror(errno), key);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  DT_USER_CHECK(in.gcount() == size, "{}: cannot read all {} bytes ({})", path, size, key);
  return parse_token_file(bytes, vocab_size, path, format);
}

}  // namespace distrain
