#include "datasets/tokenizer.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/error.hpp"
#include "datasets/bpe_tokenizer.hpp"

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
  // Debian 12's libsentencepiece carries its own protobuf runtime (3.14), which cannot share
  // a process with the protobuf 3.21 the ONNX export links: its models are refused here.
  DT_USER_CHECK(std::filesystem::path(path).extension() != ".model",
                "{}: SentencePiece .model files are not read in this version; give a byte-level BPE tokenizer.json", path);
  return parse_bpe_tokenizer(bytes, path);
}

}  // namespace distrain
