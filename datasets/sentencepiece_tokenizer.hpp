// A SentencePiece .model (Llama 2's, Mistral 7B's, Gemma's, or one `distrain tokenizer
// train` made), run by the SentencePiece library itself through its plugin
// (sentencepiece_library.hpp): its normalizer, its BPE or unigram model, byte fallback and
// its decoding are the library's, so ids are those of every tool built on it. Control
// symbols written in the text (</s>) are text, as SentencePiece treats them.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "datasets/tokenizer.hpp"

namespace distrain {

// The tokenizer of a .model file's bytes (`path` names it in errors).
std::unique_ptr<Tokenizer> parse_sentencepiece_model(const std::string& bytes, const std::string& path);

struct SentencePieceTraining {
  int64_t vocab_size = 0;
  std::string model_type = "bpe";  // or "unigram"
  int threads = 1;
};

// The .model bytes of a tokenizer that SentencePiece's trainer makes from the lines of
// UTF-8 `text` (`source` names it in errors). Every character of the text is kept (no
// normalization, spaces as written, characters outside the vocabulary as their bytes), so
// decoding gives back any text exactly; </s> (id 2) separates documents.
std::string train_sentencepiece(std::string_view text, const std::string& source, const SentencePieceTraining& training);

}  // namespace distrain
