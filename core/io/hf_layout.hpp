// How transformers lays out a Llama-family model's tensors against distrain's
// (core/io/hf_model.hpp): transposes, the query heads' order, and the attention's q, k, v
// and o projections fused into distrain's kernels and split back, exactly (no arithmetic).
#pragma once
#include <cstdint>
#include <vector>

namespace distrain {

// (rows, cols) row-major -> (cols, rows).
std::vector<float> transposed(const std::vector<float>& x, int64_t rows, int64_t cols);

// The query heads' order: distrain's head h reads key/value head h mod KV, transformers'
// head g reads g / (H / KV); distrain's head h is transformers' hf_head(h).
struct HeadOrder {
  int64_t heads, kv_heads;
  int64_t hf_head(int64_t h) const { return h % kv_heads * (heads / kv_heads) + h / kv_heads; }
};

// A Llama-family attention as transformers stores it (Linear weights (out, in)).
struct HfAttention {
  std::vector<float> q, k, v, o;              // (H d, C), (KV d, C), (KV d, C), (C, H d)
  std::vector<float> q_bias, k_bias, v_bias;  // empty without biases
};

// distrain's qkv_kernel (C, (H + 2 KV) d), qkv_bias (where a has biases) and proj_kernel
// (H d, C) from transformers' projections; and back.
void to_distrain(const HfAttention& a, int64_t c, const HeadOrder& order, int64_t d, std::vector<float>& qkv,
                 std::vector<float>& qkv_bias, std::vector<float>& proj);
HfAttention from_distrain(const std::vector<float>& qkv, const std::vector<float>* qkv_bias, const std::vector<float>& proj,
                          int64_t c, const HeadOrder& order, int64_t d);

}  // namespace distrain
