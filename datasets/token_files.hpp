// Token files of already tokenized text (data.dataset = "tokens"), in either layout:
//   nanoGPT  raw little-endian uint16 ids, nothing else (prepare.py's train.bin, val.bin)
//   llm.c    a header of 256 little-endian int32 (magic 20240520, version 1, the token
//            count), then that many uint16 ids (fineweb_train_000001.bin, ...)
// told apart by the magic (data.token_format = "auto"), or as data.token_format says
// ("raw": a raw file whose first ids happen to spell the magic). Sizes, the header and every id are checked, so a wrong or
// truncated file is a one-line UserError naming it, never garbage tokens.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace distrain {

// Reads the file at `path`; `key` is the recipe key that named it, for messages.
std::vector<int32_t> read_token_file(const std::string& path, int64_t vocab_size, const std::string& key,
                                     const std::string& format = "auto");
// The same checks on a file's bytes; `path` is for messages.
std::vector<int32_t> parse_token_file(std::span<const uint8_t> bytes, int64_t vocab_size, const std::string& path,
                                      const std::string& format = "auto");

}  // namespace distrain
