// A GPT as a model graph: repeat blocks and their names, residual gradients summed over
// consumers, the output head tied to the token embedding, and the whole model's gradients
// against finite differences of its token-level cross-entropy.
#include <cmath>
#include <set>

#include "core/backend/cpu/cpu_bf16.hpp"
#include "core/base/rng.hpp"
#include "core/layers/rotary_angles.hpp"
#include "core/model/loss.hpp"
#include "core/model/model.hpp"
#include "core/optim/optimizer.hpp"
#include "core/optim/weight_decay.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

// Two transformer blocks, width 8, 2 heads, vocabulary 7, sequences of 5.
std::string tiny_gpt(const std::string& head_extra = "tied_to = 'wte'\nuse_bias = false", double dropout = 0.0) {
  return fmt::format(R"(
input_shape = [5]
[[layers]]
type = "embedding"
name = "wte"
input_dim = 7
output_dim = 8
[[layers]]
type = "position_embedding"
[[layers]]
type = "repeat"
name = "h"
count = 2
  [[layers.layers]]
  type = "layer_norm"
  name = "ln_1"
  [[layers.layers]]
  type = "attention"
  name = "attn"
  heads = 2
  dropout = {}
  [[layers.layers]]
  type = "add"
  name = "attn_add"
  inputs = ["input", "attn"]
  [[layers.layers]]
  type = "layer_norm"
  [[layers.layers]]
  type = "dense"
  units = 16
  kernel_initializer = "normal"
  [[layers.layers]]
  type = "gelu"
  [[layers.layers]]
  type = "dense"
  name = "proj"
  units = 8
  kernel_initializer = "gpt2_residual"
  [[layers.layers]]
  type = "add"
  inputs = ["attn_add", "proj"]
[[layers]]
type = "layer_norm"
name = "ln_f"
[[layers]]
type = "dense"
name = "head"
units = 7
{}
)",
                     dropout, head_extra);
}

// Two Llama blocks, width 8, 4 query heads over `kv_heads`, rotary positions, RMS norms, a
// SwiGLU MLP of 12 units, no biases, an untied head; vocabulary 7, sequences of 5.
std::string tiny_llama(int kv_heads, const std::string& attention_extra = "") {
  return fmt::format(R"(
input_shape = [5]
[[layers]]
type = "embedding"
name = "embed_tokens"
input_dim = 7
output_dim = 8
[[layers]]
type = "repeat"
name = "layers"
count = 2
  [[layers.layers]]
  type = "rms_norm"
  name = "input_layernorm"
  [[layers.layers]]
  type = "attention"
  name = "self_attn"
  heads = 4
  kv_heads = {}
  rotary = true
  use_bias = false
  {}
  [[layers.layers]]
  type = "add"
  name = "attn_add"
  inputs = ["input", "self_attn"]
  [[layers.layers]]
  type = "rms_norm"
  name = "post_attention_layernorm"
  [[layers.layers]]
  type = "gated_mlp"
  name = "mlp"
  units = 12
  [[layers.layers]]
  type = "add"
  inputs = ["attn_add", "mlp"]
[[layers]]
type = "rms_norm"
name = "norm"
[[layers]]
type = "dense"
name = "lm_head"
units = 7
use_bias = false
kernel_initializer = "normal"
)",
                     kv_heads, attention_extra);
}

std::unique_ptr<Model> model_from(const std::string& text) {
  return std::make_unique<Model>(parse_model_spec(toml::parse(text), "gpt.toml"), cpu());
}

struct TokenBatch {
  Buffer ids, labels;
};

TokenBatch random_tokens(int64_t n, int64_t t, int64_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n * t)), labels(ids.size());
  for (auto& v : ids) v = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
  for (auto& v : labels) v = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab)));
  TokenBatch b{Buffer(cpu(), Shape{n, t}, DType::i32), Buffer(cpu(), Shape{n, t}, DType::i32)};
  cpu().upload(ids.data(), b.ids.view());
  cpu().upload(labels.data(), b.labels.view());
  return b;
}

// Mean token cross-entropy; with `backward`, the model's gradients of it.
double mean_loss(Model& m, const TokenBatch& b, bool backward) {
  Ctx ctx{cpu(), true, 99};
  Loss loss(LossSpec{}, cpu());
  const Tensor out = m.forward(ctx, b.ids.view());
  const float scale = 1.0f / static_cast<float>(b.labels.view().numel());
  const LossStats s = loss.compute(out, b.labels.view(), scale, backward ? m.output_grad() : Tensor{});
  if (backward) m.backward(ctx);
  return s.loss_sum / static_cast<double>(s.count);
}

// Values of order 0.5 (not GPT-2's 0.02), so that a nudge of eps is small against them.
void check_model_gradients(Model& m, const TokenBatch& b, int at_least = 400) {
  m.params().initialize(5);
  from_host(random_vector(static_cast<size_t>(m.params().values().numel()), 8, -0.5, 0.5), m.params().values());
  m.zero_grads();
  mean_loss(m, b, true);
  const std::vector<float> analytic = to_host(m.params().grads());
  float* values = m.params().values().f32();
  int checked = 0;
  for (const Variable& v : m.params().variables())
    for (int64_t i = 0; i < v.shape.numel(); i += 3) {  // every third element of every variable
      float* p = values + v.offset + i;
      const float saved = *p, eps = 2e-3f;
      *p = saved + eps;
      const double up = mean_loss(m, b, false);
      *p = saved - eps;
      const double down = mean_loss(m, b, false);
      *p = saved;
      const double numeric = (up - down) / (2.0 * eps), exact = analytic[static_cast<size_t>(v.offset + i)];
      INFO(v.layer << "/" << v.name << "[" << i << "]: analytic " << exact << " vs finite difference " << numeric);
      CHECK(std::abs(exact - numeric) <= 5e-4 + 2e-2 * std::abs(numeric));
      ++checked;
    }
  CHECK(checked > at_least);
}

}  // namespace

TEST_CASE("gpt: repeat blocks name their copies, the head shares the embedding's table, one arena") {
  auto m = model_from(tiny_gpt());
  std::vector<std::string> names;
  for (const auto& l : m->layers()) names.push_back(l->name());
  CHECK(names[2] == "h.0.ln_1");
  CHECK(names[4] == "h.0.attn_add");
  CHECK(names[5] == "h.0.layer_norm_1");
  CHECK(names[9] == "h.0.add_1");
  CHECK(names[10] == "h.1.ln_1");
  CHECK(m->layer_inputs(4) == std::vector<int>{1, 3});  // the block's input and its attention
  CHECK(m->layer_inputs(9) == std::vector<int>{4, 8});  // the first residual and the MLP
  CHECK(m->layer_inputs(10) == std::vector<int>{9});    // the next copy takes the last one's output
  CHECK(m->params().find("head", "kernel") == -1);        // tied: no kernel of its own
  CHECK(m->input_dtype() == DType::i32);
  CHECK(m->output_shape() == Shape{5, 7});
}

TEST_CASE("model spec: the model table read once into the graph and shapes, and models built from it are copies of its layers") {
  const ModelSpec spec = parse_model_spec(toml::parse(tiny_gpt()), "gpt.toml");
  REQUIRE(spec.layers.size() == 20);
  CHECK(spec.input_dtype == DType::i32);
  CHECK(spec.layers[4].prototype->name() == "h.0.attn_add");
  CHECK(spec.layers[4].inputs == std::vector<int>{1, 3});
  CHECK(spec.layers[10].key == "model.layers[2].layers[0]");  // the second copy's first layer
  CHECK(spec.layers[10].where == "gpt.toml:15");  // its table's `type`
  CHECK(spec.layers.back().output == Shape{5, 7});
  // Two models from one spec: the same layers and shapes, their own storage and passes.
  Model a(spec, cpu()), b(spec, cpu());
  CHECK(a.layer_shapes() == b.layer_shapes());
  CHECK(a.layers()[3].get() != spec.layers[3].prototype.get());
  a.params().initialize(1);
  b.params().initialize(2);
  CHECK(to_host(a.params().values()) != to_host(b.params().values()));
  std::vector<int32_t> ids(2 * 5, 3);
  Buffer x(cpu(), Shape{2, 5}, DType::i32);
  cpu().upload(ids.data(), x.view());
  Ctx ctx{cpu(), false};
  const std::vector<float> out_a = to_host(a.forward(ctx, x.view()));
  b.params().initialize(1);
  CHECK(to_host(b.forward(ctx, x.view())) == out_a);
  // Errors found while reading name the line of the layer's table.
  CHECK_THROWS_WITH_AS(parse_model_spec(toml::parse("input_shape = [4]\nlayers = [{ type = 'dense', units = 3 },\n"
                                                    "  { type = 'add', inputs = ['dense_1', 'dense_1'] }, { type = 'relu', inputs = 'dense_1' }]"),
                                        "m.toml"),
                       "m.toml:3: model.layers[1]: the output of layer 'add_1' goes nowhere: the last layer is the model's "
                       "output, every other must feed a later one (name it in `inputs`)",
                       UserError);
}

TEST_CASE("gpt: the whole model's gradients match finite differences, tied and untied head, attention dropout") {
  const TokenBatch b = random_tokens(2, 5, 7, 3);
  auto tied = model_from(tiny_gpt());
  check_model_gradients(*tied, b);
  auto untied = model_from(tiny_gpt("kernel_initializer = 'normal'"));
  check_model_gradients(*untied, b);
  auto dropped = model_from(tiny_gpt("tied_to = 'wte'\nuse_bias = false", 0.2));
  check_model_gradients(*dropped, b);
}

TEST_CASE("llama: the whole model's gradients match finite differences: grouped-query, multi-query, Qwen's q/k/v biases") {
  const TokenBatch b = random_tokens(2, 5, 7, 4);
  check_model_gradients(*model_from(tiny_llama(2)), b, 350);
  check_model_gradients(*model_from(tiny_llama(1)), b, 330);
  check_model_gradients(*model_from(tiny_llama(4, "qkv_bias = true\n  rope_theta = 1000.0")), b);
}

TEST_CASE("llama: a tensor degree that does not divide kv_heads, and rotary keys without rotary, are one-line errors") {
  CHECK_THROWS_WITH_AS(model_from(tiny_llama(3)), doctest::Contains("kv_heads: must divide heads = 4"), UserError);
  CHECK_THROWS_WITH_AS(model_from("input_shape = [4, 8]\n[[layers]]\ntype = 'attention'\nheads = 2\nrope_theta = 5.0\n"),
                       doctest::Contains("rope_theta: applies with rotary = true"), UserError);
}

TEST_CASE("gpt: residual projections start at 0.02 / sqrt(their number), other kernels at 0.02") {
  auto m = model_from(tiny_gpt());
  m->params().initialize(1);
  auto stddev = [&](const std::string& layer, const std::string& name) {
    const int id = m->params().find(layer, name);
    REQUIRE(id >= 0);
    const std::vector<float> v = to_host(m->params().value(id));
    double s = 0;
    for (float x : v) s += static_cast<double>(x) * x;
    return std::sqrt(s / static_cast<double>(v.size()));
  };
  CHECK(stddev("wte", "embeddings") == doctest::Approx(0.02).epsilon(0.15));
  CHECK(stddev("h.0.dense_1", "kernel") == doctest::Approx(0.02).epsilon(0.15));
  CHECK(stddev("h.0.attn", "proj_kernel") == doctest::Approx(0.01).epsilon(0.25));  // 4 residual projections
  CHECK(stddev("h.1.proj", "kernel") == doctest::Approx(0.01).epsilon(0.2));
}

TEST_CASE("gelu: the vectorised tanh form is within float rounding of the exact one, forward and slope") {
  Backend& be = cpu();
  std::vector<float> xs;
  for (float v = -12.0f; v <= 12.0f; v += 0.001f) xs.push_back(v);
  const auto n = static_cast<int64_t>(xs.size());
  Buffer x(be, Shape{n}), y(be, Shape{n}), ones(be, Shape{n}), dx(be, Shape{n});
  from_host(xs, x.view());
  be.fill(ones.view(), 1.0f);
  be.gelu(x.view(), y.view());
  be.gelu_backward(x.view(), ones.view(), dx.view());
  const std::vector<float> got = to_host(y.view()), slope = to_host(dx.view());
  double worst = 0, worst_slope = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i], t = std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v));
    const double want = 0.5 * v * (1 + t);
    const double want_slope = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
    worst = std::max(worst, std::abs(got[i] - want) / std::max(1.0, std::abs(v)));
    // The slope amplifies tanh's rounding by v (1 - t^2)'s derivative in t: |v| sqrt(2/pi) (1 + 0.134 v^2).
    const double amplified = 1.0 + std::abs(v) * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
    worst_slope = std::max(worst_slope, std::abs(slope[i] - want_slope) / amplified);
  }
  CHECK(worst < 3e-7);
  CHECK(worst_slope < 3e-7);
}

namespace {
float bf16_value(double x) { return from_bf16_bits(to_bf16_bits(static_cast<float>(x))); }
}  // namespace

// Under bf16 operands the CPU rounds what the GPU's tensor cores take: one head of 40
// positions (a single tile of keys, so the online softmax's maximum is the row's) against
// softmax(q k^T / sqrt(d)) v summed with each probability rounded to bf16; and backward
// within bf16's reach of float32's, yet not equal to it.
TEST_CASE("attention: bf16 operands round the probabilities and gradients, float32 sums") {
  Backend& be = cpu();
  const int64_t t = 40, d = 16;
  std::vector<float> qkv_values = random_vector(static_cast<size_t>(t * 3 * d), 3, -2, 2);
  for (float& v : qkv_values) v = bf16_value(v);
  Buffer qkv(be, Shape{1, t, 3 * d}), out(be, Shape{1, t, d}), lse(be, Shape{1, 1, t});
  from_host(qkv_values, qkv.view());
  be.attention(qkv.view(), 1, 1, DType::bf16, 0.0f, 1, out.view(), lse.view());
  const std::vector<float> got = to_host(out.view());
  const auto at = [&](int64_t i, int part, int64_t e) { return double{qkv_values[(i * 3 + part) * d + e]}; };
  std::vector<float> want(static_cast<size_t>(t * d));
  for (int64_t i = 0; i < t; ++i) {
    std::vector<double> s(static_cast<size_t>(i + 1));
    for (int64_t j = 0; j <= i; ++j) {
      for (int64_t e = 0; e < d; ++e) s[j] += at(i, 0, e) * at(j, 1, e);
      s[j] /= std::sqrt(double(d));
    }
    const double top = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[j] - top);
    for (int64_t e = 0; e < d; ++e) {
      double o = 0;
      for (int64_t j = 0; j <= i; ++j) o += bf16_value(std::exp(s[j] - top)) * at(j, 2, e);
      want[i * d + e] = static_cast<float>(o / sum);
    }
  }
  check_close(want, got, 1e-5);

  Buffer out32(be, out.view().shape), dout(be, out.view().shape), dqkv(be, qkv.view().shape), dqkv32(be, qkv.view().shape);
  from_host(random_vector(static_cast<size_t>(t * d), 4), dout.view());
  be.attention(qkv.view(), 1, 1, DType::f32, 0.0f, 1, out32.view(), lse.view());
  be.attention_backward(qkv.view(), out32.view(), lse.view(), dout.view(), 1, 1, DType::f32, 0.0f, 1, dqkv32.view());
  be.attention_backward(qkv.view(), out32.view(), lse.view(), dout.view(), 1, 1, DType::bf16, 0.0f, 1, dqkv.view());
  const std::vector<float> g32 = to_host(dqkv32.view()), g16 = to_host(dqkv.view());
  check_close(g32, g16, 2e-2);
  double largest_change = 0;
  for (size_t i = 0; i < g32.size(); ++i) largest_change = std::max(largest_change, double(std::abs(g32[i] - g16[i])));
  CHECK(largest_change > 1e-5);
}

namespace {

// Causal attention of one (N, T, (H + 2 KV) D) qkv in double, the definition written out:
// forward output and log-sum-exp, and the backward's dqkv for an output gradient dout.
// Query head h reads key and value head h mod KV.
struct DirectAttention {
  std::vector<float> out, lse, dqkv;
};
DirectAttention direct_attention(const std::vector<float>& qkv, const std::vector<float>& dout, int64_t n, int64_t t,
                                 int64_t c, int64_t heads, float rate, uint64_t seed, int64_t kv_heads = 0) {
  if (kv_heads == 0) kv_heads = heads;
  const int64_t d = c / heads, width = (heads + 2 * kv_heads) * d;
  const double scale = 1.0 / std::sqrt(double(d));
  DirectAttention r{std::vector<float>(size_t(n * t * c)), std::vector<float>(size_t(n * heads * t)),
                    std::vector<float>(size_t(n * t * width))};
  for (int64_t b = 0; b < n; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kv = h % kv_heads;
      const auto column = [&](int part, int64_t e) {
        return part == 0 ? h * d + e : (heads + (part - 1) * kv_heads + kv) * d + e;
      };
      const auto at = [&](int64_t i, int part, int64_t e) { return double{qkv[(b * t + i) * width + column(part, e)]}; };
      const auto grad = [&](int64_t i, int part, int64_t e) -> float& { return r.dqkv[(b * t + i) * width + column(part, e)]; };
      const int64_t row0 = (b * heads + h) * t;
      for (int64_t i = 0; i < t; ++i) {
        std::vector<double> p(size_t(i + 1)), keep(size_t(i + 1)), dp(size_t(i + 1));
        double top = -INFINITY, sum = 0, big_d = 0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t e = 0; e < d; ++e) p[j] += at(i, 0, e) * at(j, 1, e) * scale;
          top = std::max(top, p[j]);
          keep[j] = rate > 0 && uniform_at(seed, uint64_t((row0 + i) * t + j)) < rate ? 0.0 : 1.0 / (1.0 - rate);
        }
        for (double& x : p) sum += (x = std::exp(x - top));
        r.lse[row0 + i] = float(top + std::log(sum));
        const float* dout_i = dout.data() + (b * t + i) * c + h * d;
        for (int64_t e = 0; e < d; ++e) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += p[j] / sum * keep[j] * at(j, 2, e);
          r.out[(b * t + i) * c + h * d + e] = float(o);
          big_d += o * dout_i[e];
        }
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t e = 0; e < d; ++e) dp[j] += dout_i[e] * at(j, 2, e);
          const double pj = p[j] / sum, ds = pj * (dp[j] * keep[j] - big_d) * scale;
          for (int64_t e = 0; e < d; ++e) {
            grad(j, 2, e) += float(pj * keep[j] * dout_i[e]);
            grad(i, 0, e) += float(ds * at(j, 1, e));
            grad(j, 1, e) += float(ds * at(i, 0, e));
          }
        }
      }
    }
  return r;
}

}  // namespace

// Sequences of 300 span five tiles of keys and two blocks of queries of the CPU kernel, and
// head widths of 24 and 40 a vector and a part: against the definition, with and without dropout.
TEST_CASE("attention: forward and backward equal the definition over several key tiles and query blocks") {
  Backend& be = cpu();
  const int64_t n = 2, t = 300;
  for (const int64_t c : {48, 80})
    for (const float rate : {0.0f, 0.2f}) {
      CAPTURE(c);
      CAPTURE(rate);
      const int64_t heads = 2;
      const std::vector<float> qkv_values = random_vector(size_t(n * t * 3 * c), 5, -1.5, 1.5);
      const std::vector<float> dout_values = random_vector(size_t(n * t * c), 6);
      const DirectAttention want = direct_attention(qkv_values, dout_values, n, t, c, heads, rate, 9);
      Buffer qkv(be, Shape{n, t, 3 * c}), out(be, Shape{n, t, c}), lse(be, Shape{n, heads, t});
      Buffer dout(be, Shape{n, t, c}), dqkv(be, Shape{n, t, 3 * c});
      from_host(qkv_values, qkv.view());
      from_host(dout_values, dout.view());
      be.attention(qkv.view(), heads, heads, DType::f32, rate, 9, out.view(), lse.view());
      be.attention_backward(qkv.view(), out.view(), lse.view(), dout.view(), heads, heads, DType::f32, rate, 9, dqkv.view());
      check_close(want.out, to_host(out.view()), 1e-5);
      check_close(want.lse, to_host(lse.view()), 1e-6);
      check_close(want.dqkv, to_host(dqkv.view()), 1e-5);
    }
}

// Grouped-query attention: 4 query heads over 2 and over 1 (multi-query) key/value heads,
// 150 positions (three key tiles), head width 24: against the definition, each key and
// value head's gradient the sum over the query heads that read it.
TEST_CASE("attention: grouped-query and multi-query heads equal the definition, forward and backward") {
  Backend& be = cpu();
  const int64_t n = 2, t = 150, heads = 4, d = 24, c = heads * d;
  for (const int64_t kv_heads : {2, 1})
    for (const float rate : {0.0f, 0.1f}) {
      CAPTURE(kv_heads);
      CAPTURE(rate);
      const int64_t width = (heads + 2 * kv_heads) * d;
      const std::vector<float> qkv_values = random_vector(size_t(n * t * width), 15, -1.5, 1.5);
      const std::vector<float> dout_values = random_vector(size_t(n * t * c), 16);
      const DirectAttention want = direct_attention(qkv_values, dout_values, n, t, c, heads, rate, 4, kv_heads);
      Buffer qkv(be, Shape{n, t, width}), out(be, Shape{n, t, c}), lse(be, Shape{n, heads, t});
      Buffer dout(be, Shape{n, t, c}), dqkv(be, Shape{n, t, width});
      from_host(qkv_values, qkv.view());
      from_host(dout_values, dout.view());
      be.attention(qkv.view(), heads, kv_heads, DType::f32, rate, 4, out.view(), lse.view());
      be.attention_backward(qkv.view(), out.view(), lse.view(), dout.view(), heads, kv_heads, DType::f32, rate, 4,
                            dqkv.view());
      check_close(want.out, to_host(out.view()), 1e-5);
      check_close(want.lse, to_host(lse.view()), 1e-6);
      check_close(want.dqkv, to_host(dqkv.view()), 1e-5);
    }
}

// Rotary positions against the definition (Llama's rotate-half pairs), the inverse turn
// undoing the turn, and the values untouched.
TEST_CASE("rotary: queries and keys turned by position as Llama turns them, values untouched, the inverse undoes it") {
  Backend& be = cpu();
  const int64_t n = 2, t = 7, heads = 4, kv_heads = 2, d = 8, width = (heads + 2 * kv_heads) * d;
  RotarySpec spec;
  spec.theta = 500.0;
  const std::vector<float> angles = rotary_angles(spec, t, d);
  const std::vector<float> x = random_vector(size_t(n * t * width), 21, -1, 1);
  Buffer qkv(be, Shape{n, t, width}), a(be, Shape{2, t, d / 2});
  from_host(x, qkv.view());
  from_host(angles, a.view());
  be.rotary(qkv.view(), heads, kv_heads, a.view(), false);
  const std::vector<float> turned = to_host(qkv.view());
  std::vector<float> want = x;
  for (int64_t row = 0; row < n * t; ++row)
    for (int64_t h = 0; h < heads + kv_heads; ++h)
      for (int64_t e = 0; e < d / 2; ++e) {
        const double angle = double(row % t) / std::pow(500.0, 2.0 * double(e) / double(d));
        const size_t i = size_t(row * width + h * d + e), j = i + size_t(d / 2);
        want[i] = float(x[i] * std::cos(angle) - x[j] * std::sin(angle));
        want[j] = float(x[j] * std::cos(angle) + x[i] * std::sin(angle));
      }
  check_close(want, turned, 1e-5);
  be.rotary(qkv.view(), heads, kv_heads, a.view(), true);
  check_close(x, to_host(qkv.view()), 1e-6);
}

// Llama 3.1's frequency scaling as transformers' _compute_llama3_parameters writes it:
// short wavelengths kept, long ones divided by the factor, those between blended.
TEST_CASE("rotary: Llama 3 frequency scaling keeps short wavelengths, slows long ones, blends between") {
  RotarySpec plain, scaled;
  plain.theta = scaled.theta = 500000.0;
  scaled.scaling = Llama3Scaling{};
  const std::vector<double> f = plain.frequencies(128), g = scaled.frequencies(128);
  int kept = 0, slowed = 0, blended = 0;
  for (size_t e = 0; e < f.size(); ++e) {
    const double wavelength = 2 * M_PI / f[e];
    if (wavelength < 8192.0 / 4) {
      CHECK(g[e] == f[e]);
      ++kept;
    } else if (wavelength > 8192.0) {
      CHECK(g[e] == doctest::Approx(f[e] / 8).epsilon(1e-12));
      ++slowed;
    } else {
      CHECK(g[e] < f[e]);
      CHECK(g[e] > f[e] / 8);
      ++blended;
    }
  }
  CHECK(kept > 0);
  CHECK(slowed > 0);
  CHECK(blended > 0);
}

TEST_CASE("gpt: weight decay applies to kernels only, and an optimizer decays just the ranges it is given") {
  auto m = model_from(tiny_gpt());
  const ParamArena& arena = m->params();
  std::set<std::string> decayed_names;
  for (const Variable& v : arena.variables())
    if (decays(v)) decayed_names.insert(v.layer + "/" + v.name);
  CHECK(decayed_names == std::set<std::string>{"h.0.attn/qkv_kernel", "h.0.attn/proj_kernel", "h.0.dense_1/kernel",
                                               "h.0.proj/kernel", "h.1.attn/qkv_kernel", "h.1.attn/proj_kernel",
                                               "h.1.dense_1/kernel", "h.1.proj/kernel"});
  // qkv_kernel, qkv_bias, proj_kernel: the bias between them splits the ranges.
  const std::vector<Range> ranges = decayed_ranges(arena);
  const Variable& qkv = arena.variables()[static_cast<size_t>(arena.find("h.0.attn", "qkv_kernel"))];
  CHECK(ranges.front().begin == qkv.offset);
  CHECK(ranges.front().end == qkv.offset + qkv.shape.numel());  // 8 x 24: no padding

  // With zero gradients Adam moves nothing: what changes is the decay, on the ranges named.
  Backend& be = cpu();
  const int64_t n = 64;
  Buffer p(be, Shape{n}), g(be, Shape{n});
  from_host(std::vector<float>(static_cast<size_t>(n), 1.0f), p.view());
  be.fill(g.view(), 0.0f);
  OptimizerSpec spec = default_optimizer_spec("adamw");
  spec.weight_decay = 0.5;
  auto opt = make_optimizer(spec);
  opt->bind(be, n, {{0, 16}, {32, 48}});
  opt->update(p.view(), g.view(), 0.1f);
  const std::vector<float> after = to_host(p.view());
  for (int64_t i = 0; i < n; ++i) {
    INFO("element " << i);
    CHECK(after[static_cast<size_t>(i)] == doctest::Approx((i < 16 || (i >= 32 && i < 48)) ? 0.95 : 1.0));
  }
}

TEST_CASE("gpt: graph errors name the key: unknown input, an output going nowhere, arity, ties, short position table") {
  auto error = [](const std::string& text) {
    try {
      model_from(text);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string base = "input_shape = [4]\n[[layers]]\ntype='embedding'\nname='wte'\ninput_dim=5\noutput_dim=4\n";
  CHECK(error(base + "[[layers]]\ntype='add'\ninputs=['wte', 'nope']\n")
            .find("model.layers[1].inputs: no layer named 'nope' before this one") != std::string::npos);
  CHECK(error(base + "[[layers]]\ntype='add'\n").find("add takes 2 inputs, got 1") != std::string::npos);
  CHECK(error(base + "[[layers]]\ntype='gelu'\nname='g'\n[[layers]]\ntype='gelu'\ninputs=['wte']\n")
            .find("the output of layer 'g' goes nowhere") != std::string::npos);
  CHECK(error(base + "[[layers]]\ntype='dense'\nunits=5\ntied_to='other'\nuse_bias=false\n")
            .find("tied_to = 'other': no embedding layer of that name") != std::string::npos);
  CHECK(error(base + "[[layers]]\ntype='dense'\nunits=5\ntied_to='wte'\n").find("add use_bias = false") !=
        std::string::npos);
  CHECK(error(base + "[[layers]]\ntype='dense'\nunits=6\ntied_to='wte'\nuse_bias=false\n")
            .find("its table is (5, 4), this head needs (6, 4)") != std::string::npos);
  CHECK(error(base + "[[layers]]\ntype='repeat'\ncount=2\n").find("model.layers[1].layers: missing or empty") !=
        std::string::npos);
  CHECK(error(base + "[[layers]]\ntype='position_embedding'\nmax_length=3\n")
            .find("max_length 3 is shorter than the sequence (4)") != std::string::npos);
  // Nested repeats multiply: 1000 x 1000 copies would be a million layers.
  CHECK(error(base + "[[layers]]\ntype='repeat'\ncount=1000\n[[layers.layers]]\ntype='repeat'\ncount=1000\n"
                     "[[layers.layers.layers]]\ntype='gelu'\n")
            .find("the model has more than 65536 layers") != std::string::npos);
  CHECK(error("input_shape = [4]\n[[layers]]\ntype='embedding'\ninput_dim=5\noutput_dim=4\n[[layers]]\ntype='add'\n"
              "inputs=['input', 'embedding_1']\n")
            .find("layer 'add_1' reads the model's input as float32, another as int32") != std::string::npos);
}

}  // namespace distrain::test
