// Vocabulary: how text maps to the token ids a language model trains on, and back.
//   bytes       256 tokens, token = byte value (any file, any encoding)
//   characters  the sorted distinct Unicode code points of the training text (UTF-8),
//               nanoGPT's shakespeare_char: 65 for Tiny Shakespeare
//   gpt2        ids already tokenized elsewhere (dataset = "tokens"); distrain holds no
//               BPE merges, so it can neither encode nor decode text in it
//   tokenizer   a tokenizer file's (data.tokenizer: a byte-level BPE tokenizer.json),
//               referenced by its absolute path and the CRC-32C of its bytes
// to_text() is one string a checkpoint attribute can hold; from_text() restores it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "datasets/tokenizer.hpp"

namespace distrain {

class Vocabulary {
 public:
  enum class Kind { bytes, characters, gpt2, tokenizer };

  static Vocabulary bytes();
  // The distinct characters of `text` (UTF-8; invalid UTF-8 is a UserError naming `source`
  // and the byte offset).
  static Vocabulary characters(const std::string& text, const std::string& source);
  static Vocabulary gpt2(int64_t size);
  // The tokenizer in `path` (load_tokenizer's errors).
  static Vocabulary tokenizer(const std::string& path);
  // "bytes", "characters:<the characters, in order, as UTF-8>", "gpt2:<size>" or
  // "tokenizer:<crc32c>:<absolute path>"; anything else is a UserError naming `source`, and
  // so is a tokenizer file whose bytes changed since.
  static Vocabulary from_text(const std::string& text, const std::string& source = "vocabulary");

  Kind kind() const { return kind_; }
  int64_t size() const { return size_; }
  std::string to_text() const;
  // Token ids of `text`; a character outside the vocabulary is a UserError naming it (and
  // `source`). gpt2: a UserError (no tokenizer).
  std::vector<int32_t> encode(const std::string& text, const std::string& source = "text") const;
  // UTF-8 text of `tokens` (bytes: the bytes as they are); an id outside the vocabulary,
  // or any gpt2 id (no decoder), is a UserError.
  std::string decode(const std::vector<int32_t>& tokens) const;
  // Whether ids can be turned into text (all but gpt2, which has no merges here).
  bool decodes() const { return kind_ != Kind::gpt2; }
  // The token that ends a document: the tokenizer's end-of-text, GPT-2's 50256 in the
  // gpt2 vocabulary; none for bytes and characters.
  std::optional<int32_t> end_of_text() const;

 private:
  Vocabulary(Kind kind, int64_t size, std::vector<char32_t> characters = {});
  Vocabulary(std::shared_ptr<const Tokenizer> tokenizer, std::string path, uint32_t crc);
  std::string name() const;
  static Vocabulary from_tokenizer_text(const std::string& text, const std::string& source);

  Kind kind_;
  int64_t size_;
  std::vector<char32_t> characters_;  // characters only: sorted, distinct; id = position
  std::shared_ptr<const Tokenizer> tokenizer_;  // tokenizer only, with its file and its bytes' CRC-32C
  std::string tokenizer_path_;
  uint32_t tokenizer_crc_ = 0;
};

}  // namespace distrain
