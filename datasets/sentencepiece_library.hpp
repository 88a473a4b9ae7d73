// The SentencePiece plugin (libdistrain_sentencepiece.so, datasets/sentencepiece/), opened
// the first time a .model file is read or a tokenizer trained.
#pragma once
#include <string>

#include "datasets/sentencepiece_abi.h"

namespace distrain {

struct SentencePieceLibrary {
  decltype(&dt_sp_load) load;
  decltype(&dt_sp_free) free;
  decltype(&dt_sp_vocab_size) vocab_size;
  decltype(&dt_sp_eos) eos;
  decltype(&dt_sp_encode) encode;
  decltype(&dt_sp_decode) decode;
  decltype(&dt_sp_train) train;
  std::string path;  // the plugin's file
};

// The plugin's functions; a plugin that is missing or does not load is a UserError saying
// where it was looked for. DISTRAIN_SENTENCEPIECE_PLUGIN names it explicitly.
const SentencePieceLibrary& sentencepiece_library();

// For info: where the plugin was loaded from, or why it cannot be.
std::string sentencepiece_status();

}  // namespace distrain
