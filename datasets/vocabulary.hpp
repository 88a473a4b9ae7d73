// Vocabulary: how text maps to the token ids a language model trains on, and back.
//   bytes       256 tokens, token = byte value (any file, any encoding)
//   characters  the sorted distinct Unicode code points of the training text (UTF-8),
//               nanoGPT's shakespeare_char: 65 for Tiny Shakespeare
//   gpt2        ids already tokenized elsewhere (dataset = "tokens"); distrain holds no
//               BPE merges, so it can neither encode nor decode text in it
// to_text() is one string a checkpoint attribute can hold; from_text() restores it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace distrain {

class Vocabulary {
 public:
  enum class Kind { bytes, characters, gpt2 };

  static Vocabulary bytes();
  // The distinct characters of `text` (UTF-8; invalid UTF-8 is a UserError naming `source`
  // and the byte offset).
  static Vocabulary characters(const std::string& text, const std::string& source);
  static Vocabulary gpt2(int64_t size);
  // "bytes", "characters:<the characters, in order, as UTF-8>" or "gpt2:<size>"; anything
  // else is a UserError naming `source`.
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

 private:
  Vocabulary(Kind kind, int64_t size, std::vector<char32_t> characters = {});
  std::string name() const;

  Kind kind_;
  int64_t size_;
  std::vector<char32_t> characters_;  // characters only: sorted, distinct; id = position
};

}  // namespace distrain
