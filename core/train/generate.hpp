// Text from a language model: tokens sampled one at a time, each from the model's
// distribution for the position after the context (the prompt and what was sampled so
// far, its last sequence-length tokens), as nanoGPT's sample.py. No key/value cache: each
// token is one forward pass of the whole context.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "core/model/model.hpp"

namespace distrain {

struct SamplingSpec {
  int64_t tokens = 300;      // to generate
  double temperature = 1.0;  // logits are divided by it; 0: always the likeliest token
  int64_t top_k = 0;         // sample among the k likeliest only (0: all)
  uint64_t seed = 0;
};

// The next token's distribution, from logits (vocabulary): softmax(logits / temperature)
// over the top_k likeliest, sampled with `uniform` in [0, 1).
int32_t sample_token(std::vector<float> logits, const SamplingSpec& spec, double uniform);

// Appends up to spec.tokens tokens to `context` (not empty), calling on_token with each;
// stops early where on_token returns false (an end-of-text token).
void generate(Model& model, std::vector<int32_t>& context, const SamplingSpec& spec,
              const std::function<bool(int32_t)>& on_token);

}  // namespace distrain
