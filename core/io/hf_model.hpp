// Hugging Face model folders (config.json and model.safetensors, or shards listed by
// model.safetensors.index.json) in and out, for GPT-2 and the Llama family (Llama, Mistral,
// Qwen2: RMS norms, grouped-query attention with rotary positions, SwiGLU, untied or tied
// heads). Import gives a [model] table and each variable's values in distrain's layout;
// export writes what `transformers` loads with from_pretrained. Anything either side does
// not translate exactly (a config key that changes the function, an unknown tensor) is a
// UserError naming the file and the key.
//
// Layout differences handled here: transformers' Linear weights are (out, in), distrain's
// kernels (in, out) (GPT-2's Conv1D is already (in, out)); distrain fuses q, k and v into
// one kernel and its query head h reads key/value head h mod KV, where transformers' head h
// reads h / (H / KV): query heads are reordered on the way (and back).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/io/exported_model.hpp"
#include "core/io/safetensors.hpp"

namespace distrain {

struct HfImport {
  std::string architecture;  // config.json's model_type: gpt2, llama, mistral, qwen2
  std::string model_toml;    // a recipe's [model] table, layers named as transformers names them
  int64_t vocab_size = 0, seq_len = 0;
  StDType dtype = StDType::f32;  // of the source's weights
  std::map<std::string, std::vector<float>> values;  // "<layer>/<variable>" in distrain's shapes
  int64_t tensors = 0;                                // read from the source
};

// Reads `dir`; seq_len 0: the model's context, at most 1,024.
HfImport read_hf_model(const std::string& dir, int64_t seq_len);

// Writes `model` (GPT-2- or Llama-shaped) to `dir` as config.json + model.safetensors in
// `dtype`, or shards of at most `shard_bytes` with model.safetensors.index.json. Returns
// the files written.
std::vector<std::string> write_hf_model(const ExportedModel& model, const std::string& dir, StDType dtype,
                                        uint64_t shard_bytes);

}  // namespace distrain
