// Tokenizer: text to the token ids a language model reads, and back, from a file users
// already have: a Hugging Face tokenizer.json of the byte-level BPE kind (GPT-2, Llama 3,
// Qwen 2 without its normalizer, Mistral-Nemo; bpe_tokenizer.hpp) or a SentencePiece
// .model (Llama 2, Mistral 7B, Gemma, or one distrain trained; sentencepiece_tokenizer.hpp).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distrain {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The ids of UTF-8 `text` (invalid UTF-8 is a UserError naming `source` and the byte
  // offset); special tokens written in the text ("<|endoftext|>") are their own ids. No
  // beginning- or end-of-text token is added. One thread at a time (a cache of words).
  // (SentencePiece: control symbols such as </s> in the text are text.)
  virtual std::vector<int32_t> encode(std::string_view text, const std::string& source = "text") const = 0;
  // The text of `ids`; an id outside the vocabulary is a UserError.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // Ids are in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  // The token that separates documents, where the tokenizer has one.
  virtual std::optional<int32_t> end_of_text() const = 0;
  // "byte-level BPE, 50257 tokens (tokenizer.json)", for messages and `info`.
  virtual std::string describe() const = 0;
};

// The tokenizer.json or .model in `path`, told apart by its first byte. A file that is
// missing, truncated or of an unsupported kind is a UserError naming it and what is wrong.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace distrain
