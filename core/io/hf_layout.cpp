#include "core/io/hf_layout.hpp"

#include <cstddef>
#include <utility>

namespace distrain {

using std::size_t;

std::vector<float> transposed(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[static_cast<size_t>(c * rows + r)] = x[static_cast<size_t>(r * cols + c)];
  return y;
}

void to_distrain(const HfAttention& a, int64_t c, const HeadOrder& order, int64_t d, std::vector<float>& qkv,
                 std::vector<float>& qkv_bias, std::vector<float>& proj) {
  const int64_t h = order.heads, kv = order.kv_heads, width = (h + 2 * kv) * d;
  qkv.assign(static_cast<size_t>(c * width), 0.0f);
  // Column `col` of the fused kernel is row `hf_row` of q, k or v.
  const auto source = [&](int64_t col) -> std::pair<const std::vector<float>*, int64_t> {
    const int64_t head = col / d, e = col % d;
    if (head < h) return {&a.q, order.hf_head(head) * d + e};
    if (head < h + kv) return {&a.k, (head - h) * d + e};
    return {&a.v, (head - h - kv) * d + e};
  };
  for (int64_t col = 0; col < width; ++col) {
    const auto [w, row] = source(col);
    for (int64_t i = 0; i < c; ++i) qkv[static_cast<size_t>(i * width + col)] = (*w)[static_cast<size_t>(row * c + i)];
  }
  if (!a.q_bias.empty()) {
    qkv_bias.assign(static_cast<size_t>(width), 0.0f);
    for (int64_t col = 0; col < width; ++col) {
      const auto [w, row] = source(col);
      const std::vector<float>& b = w == &a.q ? a.q_bias : (w == &a.k ? a.k_bias : a.v_bias);
      qkv_bias[static_cast<size_t>(col)] = b[static_cast<size_t>(row)];
    }
  }
  proj.assign(static_cast<size_t>(h * d * c), 0.0f);
  for (int64_t head = 0; head < h; ++head)
    for (int64_t e = 0; e < d; ++e)
      for (int64_t i = 0; i < c; ++i)
        proj[static_cast<size_t>((head * d + e) * c + i)] =
            a.o[static_cast<size_t>(i * h * d + order.hf_head(head) * d + e)];
}

HfAttention from_distrain(const std::vector<float>& qkv, const std::vector<float>* qkv_bias, const std::vector<float>& proj,
                          int64_t c, const HeadOrder& order, int64_t d) {
  const int64_t h = order.heads, kv = order.kv_heads, width = (h + 2 * kv) * d;
  HfAttention a;
  a.q.resize(static_cast<size_t>(h * d * c));
  a.k.resize(static_cast<size_t>(kv * d * c));
  a.v.resize(a.k.size());
  if (qkv_bias) {
    a.q_bias.resize(static_cast<size_t>(h * d));
    a.k_bias.resize(static_cast<size_t>(kv * d));
    a.v_bias.resize(a.k_bias.size());
  }
  for (int64_t col = 0; col < width; ++col) {
    const int64_t head = col / d, e = col % d;
    std::vector<float>* w;
    std::vector<float>* b;
    int64_t row;
    if (head < h) w = &a.q, b = &a.q_bias, row = order.hf_head(head) * d + e;
    else if (head < h + kv) w = &a.k, b = &a.k_bias, row = (head - h) * d + e;
    else w = &a.v, b = &a.v_bias, row = (head - h - kv) * d + e;
    for (int64_t i = 0; i < c; ++i) (*w)[static_cast<size_t>(row * c + i)] = qkv[static_cast<size_t>(i * width + col)];
    if (qkv_bias) (*b)[static_cast<size_t>(row)] = (*qkv_bias)[static_cast<size_t>(col)];
  }
  a.o.resize(static_cast<size_t>(c * h * d));
  for (int64_t head = 0; head < h; ++head)
    for (int64_t e = 0; e < d; ++e)
      for (int64_t i = 0; i < c; ++i)
        a.o[static_cast<size_t>(i * h * d + order.hf_head(head) * d + e)] = proj[static_cast<size_t>((head * d + e) * c + i)];
  return a;
}

}  // namespace distrain
