#include "datasets/tokenizer.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/error.hpp"
#include "datasets/bpe_tokenizer.hpp"
#include "datasets/sentencepiece_tokenizer.hpp"

namespace distrain {

namespace {

std::string read_file(const std::string& path) {
  std::error_code ec;
  DT_USER_CHECK(std::filesystem::is_regular_file(path, ec), "{}: tokenizer not found (data.tokenizer: a tokenizer.json or "
                "a SentencePiece .model)", path);
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  DT_USER_CHECK(in.good() || in.eof(), "{}: cannot read the tokenizer", path);
  return bytes.str();
}

}  // namespace

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const std::string bytes = read_file(path);
  DT_USER_CHECK(!bytes.empty(), "{}: the tokenizer file is empty", path);
  // A tokenizer.json starts with '{'; a .model is a protobuf message, whose first byte is
  // a field's tag (0x0a: its pieces).
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && bytes[first] == '{') return parse_bpe_tokenizer(bytes, path);
  return parse_sentencepiece_model(bytes, path);
}

}  // namespace distrain
