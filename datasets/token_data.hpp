// Token data for language models: data.dataset = "text" (a text file, tokenized here by a
// bytes or characters vocabulary, its last validation_fraction validating, as nanoGPT's
// shakespeare_char) or "tokens" (train and validation files already tokenized, nanoGPT's
// or llm.c's layout: datasets/token_files.hpp). Each split is one stream of ids; its
// examples are windows of data.seq_len tokens (Dataset::window), labelled with the next
// token of each (the loader cuts them: datasets/loader.hpp).
#pragma once
#include "datasets/dataset.hpp"

namespace distrain {

// Every problem (file missing, invalid UTF-8, a bad token file, a split too short for one
// window of seq_len + 1 tokens) is a one-line UserError naming the file and the key.
Splits read_text_splits(const DataSpec& spec);
// The size of the vocabulary `spec`'s token ids are in (a "characters" text is read for it).
int64_t token_vocabulary_size(const DataSpec& spec);
Splits read_token_splits(const DataSpec& spec);

}  // namespace distrain
