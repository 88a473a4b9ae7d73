// A Hugging Face tokenizer.json of the byte-level BPE kind, as GPT-2, Llama 3, Qwen 2 and
// Mistral-Nemo ship it:
//   - added tokens (<|endoftext|>, ...) are found in the text first and kept whole;
//   - the pre-tokenizer cuts the rest into words with its split regex (GPT-2's, or a Split
//     pre-tokenizer's pattern), run by PCRE2 with Unicode properties (UCP) and its JIT;
//   - each word's bytes become characters by the byte-to-unicode table of GPT-2, and BPE
//     merges their symbols, lowest rank first, into vocabulary ids (a word the vocabulary
//     holds whole is taken whole under ignore_merges, as Llama 3's file says);
//   - decoding maps the characters back to bytes.
// Normalizers and other pre-tokenizers (WordPiece, Unigram, Metaspace models) are refused
// with the file's name and what it holds.
#pragma once
#include <memory>
#include <string>

#include "datasets/tokenizer.hpp"

namespace distrain {

// The tokenizer of the tokenizer.json text `json` (`path` names it in errors).
std::unique_ptr<Tokenizer> parse_bpe_tokenizer(const std::string& json, const std::string& path);

}  // namespace distrain
