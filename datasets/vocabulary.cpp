#include "datasets/vocabulary.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/crc32c.hpp"
#include "core/base/error.hpp"
#include "datasets/utf8.hpp"

namespace distrain {

namespace {

constexpr const char* kCharactersPrefix = "characters:";
constexpr const char* kGpt2Prefix = "gpt2:";
constexpr const char* kTokenizerPrefix = "tokenizer:";
constexpr int64_t kMaxGpt2Size = int64_t{1} << 16;  // token files hold uint16 ids

bool strictly_increasing(const std::vector<char32_t>& v) {
  return std::adjacent_find(v.begin(), v.end(), [](char32_t a, char32_t b) { return a >= b; }) == v.end();
}

}  // namespace

Vocabulary::Vocabulary(Kind kind, int64_t size, std::vector<char32_t> characters)
    : kind_(kind), size_(size), characters_(std::move(characters)) {}

Vocabulary::Vocabulary(std::shared_ptr<const Tokenizer> tokenizer, std::string path, uint32_t crc)
    : kind_(Kind::tokenizer),
      size_(tokenizer->vocab_size()),
      tokenizer_(std::move(tokenizer)),
      tokenizer_path_(std::move(path)),
      tokenizer_crc_(crc) {}

namespace {

// The CRC-32C of a file's bytes ("" read: a missing file, which load_tokenizer names).
uint32_t file_crc(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return crc32c(bytes.str());
}

}  // namespace

Vocabulary Vocabulary::tokenizer(const std::string& path) {
  std::shared_ptr<const Tokenizer> loaded = load_tokenizer(path);
  std::error_code ec;
  const std::string absolute = std::filesystem::absolute(path, ec).lexically_normal().string();
  return Vocabulary(std::move(loaded), ec ? path : absolute, file_crc(path));
}

Vocabulary Vocabulary::bytes() { return Vocabulary(Kind::bytes, 256); }

Vocabulary Vocabulary::characters(const std::string& text, const std::string& source) {
  std::vector<char32_t> cps = decode_utf8(text, source, "; vocabulary = \"characters\" needs UTF-8 text (\"bytes\" takes any)");
  std::sort(cps.begin(), cps.end());
  cps.erase(std::unique(cps.begin(), cps.end()), cps.end());
  DT_USER_CHECK(!cps.empty(), "{}: no characters to make a vocabulary of (the file is empty)", source);
  const auto size = static_cast<int64_t>(cps.size());
  return Vocabulary(Kind::characters, size, std::move(cps));
}

Vocabulary Vocabulary::gpt2(int64_t size) {
  DT_USER_CHECK(size >= 2 && size <= kMaxGpt2Size, "gpt2 vocabulary of {} tokens: must be in [2, {}]", size, kMaxGpt2Size);
  return Vocabulary(Kind::gpt2, size);
}

// "tokenizer:<crc32c>:<path>": the file must still hold the bytes the ids were made with.
Vocabulary Vocabulary::from_tokenizer_text(const std::string& text, const std::string& source) {
  const std::string_view rest = std::string_view(text).substr(std::string_view(kTokenizerPrefix).size());
  uint32_t crc = 0;
  const auto [end, ec] = std::from_chars(rest.data(), rest.data() + std::min<size_t>(rest.size(), 8), crc, 16);
  DT_USER_CHECK(ec == std::errc{} && end == rest.data() + 8 && rest.size() > 9 && rest[8] == ':',
                "{}: '{:.60}' is not a tokenizer vocabulary (\"tokenizer:<crc32c>:<path>\")", source, text);
  const std::string path(rest.substr(9));
  Vocabulary v = tokenizer(path);
  DT_USER_CHECK(v.tokenizer_crc_ == crc, "{}: the tokenizer {} changed since (CRC-32C {:08x} then, {:08x} now): the ids "
                "would mean other text; put back the file it was trained with", source, path, crc, v.tokenizer_crc_);
  return v;
}

Vocabulary Vocabulary::from_text(const std::string& text, const std::string& source) {
  if (text == "bytes") return bytes();
  if (text.starts_with(kCharactersPrefix)) {
    std::vector<char32_t> cps = decode_utf8(std::string_view(text).substr(std::string_view(kCharactersPrefix).size()), source);
    DT_USER_CHECK(!cps.empty() && strictly_increasing(cps),
                  "{}: a characters vocabulary lists distinct characters in increasing order, at least one", source);
    const auto size = static_cast<int64_t>(cps.size());
    return Vocabulary(Kind::characters, size, std::move(cps));
  }
  if (text.starts_with(kGpt2Prefix)) {
    const std::string_view digits = std::string_view(text).substr(std::string_view(kGpt2Prefix).size());
    int64_t size = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), size);
    if (ec == std::errc{} && end == digits.data() + digits.size() && size >= 2 && size <= kMaxGpt2Size) return gpt2(size);
  }
  if (text.starts_with(kTokenizerPrefix)) return from_tokenizer_text(text, source);
  throw UserError(fmt::format("{}: '{:.40}' is not a vocabulary (expected \"bytes\", \"characters:<characters>\", "
                              "\"gpt2:<size>\" or \"tokenizer:<crc32c>:<path>\")", source, text));
}

std::string Vocabulary::name() const {
  switch (kind_) {
    case Kind::bytes: return "bytes";
    case Kind::characters: return "characters";
    case Kind::gpt2: return "gpt2";
    case Kind::tokenizer: return "tokenizer";
  }
  return "";
}

std::string Vocabulary::to_text() const {
  if (kind_ == Kind::gpt2) return fmt::format("{}{}", kGpt2Prefix, size_);
  if (kind_ == Kind::bytes) return "bytes";
  if (kind_ == Kind::tokenizer) return fmt::format("{}{:08x}:{}", kTokenizerPrefix, tokenizer_crc_, tokenizer_path_);
  std::string out = kCharactersPrefix;
  for (char32_t cp : characters_) append_utf8(out, cp);
  return out;
}

std::vector<int32_t> Vocabulary::encode(const std::string& text, const std::string& source) const {
  DT_USER_CHECK(kind_ != Kind::gpt2, "{}: the gpt2 vocabulary cannot encode text in distrain (no BPE tokenizer); "
                "tokenize with tiktoken and use dataset = \"tokens\"", source);
  if (kind_ == Kind::tokenizer) return tokenizer_->encode(text, source);
  if (kind_ == Kind::bytes) return std::vector<int32_t>(reinterpret_cast<const uint8_t*>(text.data()),
                                                        reinterpret_cast<const uint8_t*>(text.data()) + text.size());
  const std::vector<char32_t> cps = decode_utf8(text, source);
  std::vector<int32_t> ids(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) {
    const auto at = std::lower_bound(characters_.begin(), characters_.end(), cps[i]);
    DT_USER_CHECK(at != characters_.end() && *at == cps[i], "{}: character {} is not in the vocabulary of {} characters",
                  source, describe_code_point(cps[i]), size_);
    ids[i] = static_cast<int32_t>(at - characters_.begin());
  }
  return ids;
}

std::optional<int32_t> Vocabulary::end_of_text() const {
  if (kind_ == Kind::tokenizer) return tokenizer_->end_of_text();
  if (kind_ == Kind::gpt2 && size_ > 50256) return 50256;  // <|endoftext|>
  return std::nullopt;
}

std::string Vocabulary::decode(const std::vector<int32_t>& tokens) const {
  DT_USER_CHECK(kind_ != Kind::gpt2, "the gpt2 vocabulary cannot decode token ids in distrain (no BPE merges); decode "
                "them with tiktoken (encoding \"gpt2\")");
  if (kind_ == Kind::tokenizer) return tokenizer_->decode(tokens);
  std::string out;
  out.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    DT_USER_CHECK(t >= 0 && t < size_, "token {} at position {} is outside the {} vocabulary (0..{})", t, i, name(),
                  size_ - 1);
    if (kind_ == Kind::bytes) out.push_back(static_cast<char>(t));
    else append_utf8(out, characters_[static_cast<size_t>(t)]);
  }
  return out;
}

}  // namespace distrain
