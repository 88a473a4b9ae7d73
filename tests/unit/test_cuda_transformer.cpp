// The GPT's ops on the GPU against their CPU twins (float32: 1e-5 of the largest value;
// bf16 rounding bit for bit; bf16 products 1e-4, the same rounded operands summed in another
// order), the vocabulary-sized cross-entropy, and a GPT trained on cuda:0 against the CPU.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "core/layers/rotary_angles.hpp"
#include "tests/unit/cuda_pair.hpp"
#include "tests/unit/gpt_fixture.hpp"

namespace distrain::test {
namespace {

void same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  INFO(what);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) FAIL_CHECK("element " << i << ": " << a[i] << " vs " << b[i]);
}

}  // namespace

TEST_CASE("cuda parity: embedding and vocabulary slices, forward and the scatter-added gradient") {
  SKIP_WITHOUT_GPU();
  const int64_t vocab = 50, c = 40, n = 300;  // 300 ids of 50: every row repeated, added in position order
  const Pair ids = labels(n, vocab, 1);
  Pair table(Shape{vocab, c}, 2), out(Shape{n, c}, 3), dout(Shape{n, c}, 4), dtable(Shape{vocab, c}, 5);
  cpu().embedding(table.cv(), ids.cv(), out.cv());
  gpu().embedding(table.gv(), ids.gv(), out.gv());
  check_pair(out, "embedding", 0.0);
  cpu().embedding_backward(ids.cv(), dout.cv(), dtable.cv());
  gpu().embedding_backward(ids.gv(), dout.gv(), dtable.gv());
  check_pair(dtable, "embedding_backward");
  Pair slice(Shape{20, c}, 6), dslice(Shape{20, c}, 7);  // ids 15..34
  cpu().embedding_slice(slice.cv(), ids.cv(), 15, out.cv());
  gpu().embedding_slice(slice.gv(), ids.gv(), 15, out.gv());
  check_pair(out, "embedding_slice (zero rows outside)", 0.0);
  cpu().embedding_slice_backward(ids.cv(), 15, dout.cv(), dslice.cv());
  gpu().embedding_slice_backward(ids.gv(), 15, dout.gv(), dslice.gv());
  check_pair(dslice, "embedding_slice_backward");
}

TEST_CASE("cuda: an id past the embedding's vocabulary gives NaN rows on the GPU, not a read outside the table") {
  SKIP_WITHOUT_GPU();
  Pair table(Shape{10, 8}, 1), out(Shape{2, 8}, 2);
  const std::vector<int32_t> bad{3, 10};
  Pair ids(Shape{2}, std::vector<float>(2), DType::i32);
  gpu().upload(bad.data(), ids.gv());
  gpu().embedding(table.gv(), ids.gv(), out.gv());
  const std::vector<float> got = to_host(out.gv());
  CHECK(std::isfinite(got[0]));
  CHECK(std::isnan(got[8]));
}

TEST_CASE("cuda parity: layer norm forward and backward (with and without the input gradient), GELU") {
  SKIP_WITHOUT_GPU();
  for (const int64_t c : {int64_t{768}, int64_t{45}}) {
    INFO("width " << c);
    const int64_t rows = 70;
    Pair x(Shape{rows, c}, 1, -3, 5), gamma(Shape{c}, 2), beta(Shape{c}, 3), y(Shape{rows, c}, 4);
    Pair mean(Shape{rows}, 5), rstd(Shape{rows}, 6), dy(Shape{rows, c}, 7), dx(Shape{rows, c}, 8);
    Pair dgamma(Shape{c}, 9), dbeta(Shape{c}, 10);
    cpu().layer_norm(x.cv(), gamma.cv(), beta.cv(), 1e-5f, y.cv(), mean.cv(), rstd.cv());
    gpu().layer_norm(x.gv(), gamma.gv(), beta.gv(), 1e-5f, y.gv(), mean.gv(), rstd.gv());
    check_pair(y, "layer_norm");
    check_pair(mean, "layer_norm mean");
    check_pair(rstd, "layer_norm rstd");
    cpu().layer_norm_backward(x.cv(), dy.cv(), gamma.cv(), mean.cv(), rstd.cv(), dx.cv(), dgamma.cv(), dbeta.cv());
    gpu().layer_norm_backward(x.gv(), dy.gv(), gamma.gv(), mean.gv(), rstd.gv(), dx.gv(), dgamma.gv(), dbeta.gv());
    check_pair(dx, "layer_norm dx");
    check_pair(dgamma, "layer_norm dgamma");
    check_pair(dbeta, "layer_norm dbeta");
    cpu().layer_norm_backward(x.cv(), dy.cv(), gamma.cv(), mean.cv(), rstd.cv(), Tensor{}, dgamma.cv(), dbeta.cv());
    gpu().layer_norm_backward(x.gv(), dy.gv(), gamma.gv(), mean.gv(), rstd.gv(), Tensor{}, dgamma.gv(), dbeta.gv());
    check_pair(dgamma, "layer_norm dgamma, no dx");
  }
  Pair x(Shape{10000}, 11, -6, 6), y(Shape{10000}, 12), dy(Shape{10000}, 13);
  cpu().gelu(x.cv(), y.cv());
  gpu().gelu(x.gv(), y.gv());
  check_pair(y, "gelu");
  cpu().gelu_backward(x.cv(), dy.cv(), dy.cv());
  gpu().gelu_backward(x.gv(), dy.gv(), dy.gv());
  check_pair(dy, "gelu_backward in place");
}

// Head dimensions 18, 20 and 48 (padded: a tile's columns partly idle; under bf16 18 is
// read a float at a time, the others 4), 32, 64 and 128; sequences of one tile and past
// two (the last tiles partly empty); with and without dropout on the probabilities (the
// same mask drawn on both). Float32 operands within 1e-5;
// bf16 operands (tensor cores) within 1e-3: the same rounded operands, but a score summed
// in another order can round its probability to the neighbouring bf16 value (2^-8 of it).
TEST_CASE("cuda parity: causal attention forward and backward, with and without dropout, float32 and bf16") {
  SKIP_WITHOUT_GPU();
  struct Case {
    int64_t d, t;
    float rate;
  };
  for (const DType operands : {DType::f32, DType::bf16})
    for (const Case k : {Case{32, 64, 0.0f}, Case{48, 75, 0.2f}, Case{64, 150, 0.0f}, Case{64, 150, 0.2f},
                         Case{128, 70, 0.1f}, Case{20, 130, 0.0f}, Case{18, 70, 0.1f}}) {
      INFO("head dimension " << k.d << ", sequence " << k.t << ", dropout " << k.rate << ", operands "
                             << dtype_name(operands));
      const int64_t n = 2, heads = 3, c = heads * k.d;
      const double tol = operands == DType::bf16 ? 1e-3 : 1e-5;
      Pair qkv(Shape{n, k.t, 3 * c}, 1, -2, 2), out(Shape{n, k.t, c}, 2), lse(Shape{n, heads, k.t}, 3);
      Pair dout(Shape{n, k.t, c}, 4), dqkv(Shape{n, k.t, 3 * c}, 5);
      if (operands == DType::bf16) {  // as the attention layer passes them
        cpu().to_bf16(qkv.cv(), Tensor{});
        gpu().to_bf16(qkv.gv(), Tensor{});
      }
      cpu().attention(qkv.cv(), heads, heads, operands, k.rate, 77, out.cv(), lse.cv());
      gpu().attention(qkv.gv(), heads, heads, operands, k.rate, 77, out.gv(), lse.gv());
      check_pair(out, "attention out", tol);
      check_pair(lse, "attention lse", tol);
      cpu().attention_backward(qkv.cv(), out.cv(), lse.cv(), dout.cv(), heads, heads, operands, k.rate, 77, dqkv.cv());
      gpu().attention_backward(qkv.gv(), out.gv(), lse.gv(), dout.gv(), heads, heads, operands, k.rate, 77, dqkv.gv());
      check_pair(dqkv, "attention dqkv", tol);
    }
}

// Grouped-query and multi-query attention on the GPU (the key and value heads widened onto
// the multi-head kernels, their gradients summed back) against the CPU's native kernel.
TEST_CASE("cuda parity: grouped-query and multi-query attention, forward and backward, float32 and bf16") {
  SKIP_WITHOUT_GPU();
  for (const DType operands : {DType::f32, DType::bf16})
    for (const int64_t kv_heads : {2, 1}) {
      INFO("kv_heads " << kv_heads << ", operands " << dtype_name(operands));
      const int64_t n = 2, t = 130, heads = 4, d = 32, c = heads * d, width = (heads + 2 * kv_heads) * d;
      const double tol = operands == DType::bf16 ? 1e-3 : 1e-5;
      Pair qkv(Shape{n, t, width}, 31, -2, 2), out(Shape{n, t, c}, 32), lse(Shape{n, heads, t}, 33);
      Pair dout(Shape{n, t, c}, 34), dqkv(Shape{n, t, width}, 35);
      if (operands == DType::bf16) {
        cpu().to_bf16(qkv.cv(), Tensor{});
        gpu().to_bf16(qkv.gv(), Tensor{});
      }
      cpu().attention(qkv.cv(), heads, kv_heads, operands, 0.1f, 7, out.cv(), lse.cv());
      gpu().attention(qkv.gv(), heads, kv_heads, operands, 0.1f, 7, out.gv(), lse.gv());
      check_pair(out, "gqa out", tol);
      check_pair(lse, "gqa lse", tol);
      cpu().attention_backward(qkv.cv(), out.cv(), lse.cv(), dout.cv(), heads, kv_heads, operands, 0.1f, 7, dqkv.cv());
      gpu().attention_backward(qkv.gv(), out.gv(), lse.gv(), dout.gv(), heads, kv_heads, operands, 0.1f, 7, dqkv.gv());
      check_pair(dqkv, "gqa dqkv", tol);
    }
}

// The Llama ops: RMS norm and its gradients, rotary positions there and back, SiLU, and
// the gated units (SwiGLU, GeGLU) with their gradients, against the CPU twins.
TEST_CASE("cuda parity: rms_norm, rotary positions, silu and gated units, forward and backward") {
  SKIP_WITHOUT_GPU();
  const int64_t rows = 70, c = 96;
  Pair x(Shape{rows, c}, 41, -3, 3), gamma(Shape{c}, 42), y(Shape{rows, c}, 43), rstd(Shape{rows}, 44);
  Pair dy(Shape{rows, c}, 45), dx(Shape{rows, c}, 46), dgamma(Shape{c}, 47);
  cpu().rms_norm(x.cv(), gamma.cv(), 1e-6f, y.cv(), rstd.cv());
  gpu().rms_norm(x.gv(), gamma.gv(), 1e-6f, y.gv(), rstd.gv());
  check_pair(y, "rms_norm");
  check_pair(rstd, "rms_norm rstd");
  cpu().rms_norm_backward(x.cv(), dy.cv(), gamma.cv(), rstd.cv(), dx.cv(), dgamma.cv());
  gpu().rms_norm_backward(x.gv(), dy.gv(), gamma.gv(), rstd.gv(), dx.gv(), dgamma.gv());
  check_pair(dx, "rms_norm dx");
  check_pair(dgamma, "rms_norm dgamma");

  const int64_t n = 2, t = 20, heads = 4, kv_heads = 2, d = 16, width = (heads + 2 * kv_heads) * d;
  RotarySpec spec;
  Pair qkv(Shape{n, t, width}, 48), angles(Shape{2, t, d / 2}, rotary_angles(spec, t, d));
  for (const bool inverse : {false, true}) {
    cpu().rotary(qkv.cv(), heads, kv_heads, angles.cv(), inverse);
    gpu().rotary(qkv.gv(), heads, kv_heads, angles.gv(), inverse);
    check_pair(qkv, inverse ? "rotary back" : "rotary");
  }

  Pair a(Shape{10000}, 49, -6, 6), b(Shape{10000}, 50), db(Shape{10000}, 51);
  cpu().silu(a.cv(), b.cv());
  gpu().silu(a.gv(), b.gv());
  check_pair(b, "silu");
  cpu().silu_backward(a.cv(), db.cv(), db.cv());
  gpu().silu_backward(a.gv(), db.gv(), db.gv());
  check_pair(db, "silu_backward in place");

  for (const GateActivation act : {GateActivation::silu, GateActivation::gelu}) {
    Pair h(Shape{rows, 2 * c}, 52, -4, 4), g(Shape{rows, c}, 53), dg(Shape{rows, c}, 54), dh(Shape{rows, 2 * c}, 55);
    cpu().gated_unit(h.cv(), act, g.cv());
    gpu().gated_unit(h.gv(), act, g.gv());
    check_pair(g, act == GateActivation::silu ? "swiglu" : "geglu");
    cpu().gated_unit_backward(h.cv(), act, dg.cv(), dh.cv());
    gpu().gated_unit_backward(h.gv(), act, dg.gv(), dh.gv());
    check_pair(dh, act == GateActivation::silu ? "swiglu backward" : "geglu backward");
  }
}

TEST_CASE("cuda: attention heads wider than the GPU kernels take are refused by name") {
  SKIP_WITHOUT_GPU();
  Pair qkv(Shape{1, 4, 3 * 256}, 1), out(Shape{1, 4, 256}, 2), lse(Shape{1, 1, 4}, 3);
  CHECK_THROWS_WITH_AS(gpu().attention(qkv.gv(), 1, 1, DType::f32, 0.0f, 1, out.gv(), lse.gv()),
                       doctest::Contains("heads of 256 features"), UserError);
}

TEST_CASE("cuda parity: bf16 rounding, packing and unpacking bit for bit, and bf16 products in all four transpose cases and from bf16 operands") {
  SKIP_WITHOUT_GPU();
  std::vector<float> values = random_vector(4099, 1, -1e3, 1e3);
  values[0] = NAN;
  values[1] = INFINITY;
  values[2] = 3.0e38f;  // rounds up past float's largest finite bf16 neighbour
  Pair x(Shape{4099}, values), rounded(Shape{4099}, 2), packed(Shape{4099}, std::vector<float>(4099), DType::bf16);
  Pair back(Shape{4099}, 3);
  cpu().rounded_bf16(x.cv(), rounded.cv());
  gpu().rounded_bf16(x.gv(), rounded.gv());
  same_bits(to_host(rounded.cv()), to_host(rounded.gv()), "rounded_bf16 to float32");
  cpu().rounded_bf16(x.cv(), packed.cv());
  gpu().rounded_bf16(x.gv(), packed.gv());
  cpu().from_bf16(packed.cv(), back.cv());
  gpu().from_bf16(packed.gv(), back.gv());
  same_bits(to_host(back.cv()), to_host(back.gv()), "rounded_bf16 packed, then from_bf16");
  // Views one float past a 16-byte boundary take the one-element kernels.
  cpu().rounded_bf16(x.cv().range(1, 4097), rounded.cv().range(1, 4097));
  gpu().rounded_bf16(x.gv().range(1, 4097), rounded.gv().range(1, 4097));
  same_bits(to_host(rounded.cv()), to_host(rounded.gv()), "rounded_bf16 of unaligned views");
  cpu().to_bf16(x.cv(), packed.cv());
  gpu().to_bf16(x.gv(), packed.gv());
  same_bits(to_host(x.cv()), to_host(x.gv()), "to_bf16 in place");
  CHECK(gpu().bf16_matmul_unavailable().empty());
  const int64_t m = 65, k = 300, n = 47;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      INFO("transposes " << ta << tb);
      Pair a(ta ? Shape{k, m} : Shape{m, k}, 4), b(tb ? Shape{n, k} : Shape{k, n}, 5), c(Shape{m, n}, 6);
      cpu().gemm_bf16(ta, tb, a.cv(), b.cv(), 0.5f, c.cv());
      gpu().gemm_bf16(ta, tb, a.gv(), b.gv(), 0.5f, c.gv());
      check_pair(c, "gemm_bf16", 1e-4);
    }
  // Operands handed over in bf16 (a: an input the model keeps in bf16, b: a gradient
  // rounded once): copied into place where their rows or the inner dimension are not
  // multiples of 8 (k = 300, m = 65), read where they lie where they are (k = 64, 48 x 48).
  auto as_bf16 = [](const Pair& x) {
    Pair packed(x.cv().shape, std::vector<float>(static_cast<size_t>(x.cv().numel())), DType::bf16);
    cpu().rounded_bf16(x.cv(), packed.cv());
    gpu().rounded_bf16(x.gv(), packed.gv());
    return packed;
  };
  for (const int64_t inner : {k, int64_t{64}})
    for (const int64_t rows : {m, int64_t{48}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          INFO("bf16 a and b, k " << inner << ", m " << rows << ", transposes " << ta << tb);
          const Pair a32(ta ? Shape{inner, rows} : Shape{rows, inner}, 12), b32(tb ? Shape{48, inner} : Shape{inner, 48}, 13);
          const Pair a16 = as_bf16(a32), b16 = as_bf16(b32);
          Pair c(Shape{rows, 48}, 14);
          cpu().gemm_bf16(ta, tb, a16.cv(), b16.cv(), 0.5f, c.cv());
          gpu().gemm_bf16(ta, tb, a16.gv(), b16.gv(), 0.5f, c.gv());
          check_pair(c, "gemm_bf16 with bf16 operands", 1e-4);
        }
}

// An op that rounds its output as it writes it (OutputRounding, train.precision = "bf16")
// gives the op followed by to_bf16, bit for bit: the float32 values, the packed ones, and
// rounded without packing. Rows of 45 (unaligned: one value a thread) and of 48 (the bias
// and GELU 8 values a thread); and the same ops without rounding against the CPU's.
namespace {
void check_rounded_output_ops(int64_t c) {
  INFO("rows of " << c);
  const int64_t rows = 97;
  const Shape shape{rows, c};
  const Pair x(shape, 1, -4, 4), other(shape, 2, -4, 4), bias(Shape{c}, 3), gamma(Shape{c}, 4), beta(Shape{c}, 5);
  const Pair mean(Shape{rows}, 6), rstd(Shape{rows}, 7);
  auto unpacked = [](const Buffer& packed) {
    Buffer values(gpu(), packed.shape());
    gpu().from_bf16(packed.view(), values.view());
    return to_host(values.view());
  };
  using Op = std::function<void(Tensor y, const OutputRounding&)>;
  auto check = [&](const char* what, const Op& op) {
    INFO(what);
    Buffer after(gpu(), shape), fused(gpu(), shape), fused_unpacked(gpu(), shape);
    Buffer after_packed(gpu(), shape, DType::bf16), fused_packed(gpu(), shape, DType::bf16);
    op(after.view(), {});
    gpu().to_bf16(after.view(), after_packed.view());
    op(fused.view(), {true, fused_packed.view()});
    op(fused_unpacked.view(), {true, Tensor{}});
    same_bits(to_host(after.view()), to_host(fused.view()), "float32");
    same_bits(unpacked(after_packed), unpacked(fused_packed), "packed");
    same_bits(to_host(after.view()), to_host(fused_unpacked.view()), "rounded, not packed");
  };
  check("add_bias", [&](Tensor y, const OutputRounding& r) {
    gpu().copy(x.gv(), y);
    gpu().add_bias(y, bias.gv(), r);
  });
  check("add", [&](Tensor y, const OutputRounding& r) { gpu().add(x.gv(), other.gv(), y, r); });
  check("layer_norm", [&](Tensor y, const OutputRounding& r) {
    gpu().layer_norm(x.gv(), gamma.gv(), beta.gv(), 1e-5f, y, mean.gv(), rstd.gv(), r);
  });
  check("gelu", [&](Tensor y, const OutputRounding& r) { gpu().gelu(x.gv(), y, r); });
  Pair sum(shape, 8), biased(shape, 1, -4, 4), gelu(shape, 9);
  cpu().add(x.cv(), other.cv(), sum.cv());
  gpu().add(x.gv(), other.gv(), sum.gv());
  check_pair(sum, "add", 0.0);
  cpu().add_bias(biased.cv(), bias.cv());
  gpu().add_bias(biased.gv(), bias.gv());
  check_pair(biased, "add_bias", 0.0);
  cpu().gelu(x.cv(), gelu.cv());
  gpu().gelu(x.gv(), gelu.gv());
  check_pair(gelu, "gelu");
}
}  // namespace

TEST_CASE("cuda: bias, add, layer norm and GELU rounding the output they write give the op then to_bf16, bit for bit") {
  SKIP_WITHOUT_GPU();
  check_rounded_output_ops(45);
  check_rounded_output_ops(48);
}

// C's rows unaligned (4,099 floats) and larger than the 256 MB staged at once: the product
// goes through the aligned copy in two parts; k = 20 padded to 24 with zeros.
TEST_CASE("cuda parity: a bf16 product whose output rows are unaligned, in parts, with the inner dimension padded") {
  SKIP_WITHOUT_GPU();
  const int64_t m = 16400, k = 20, n = 4099;
  for (bool ta : {false, true}) {
    INFO("transpose a " << ta);
    Pair a(ta ? Shape{k, m} : Shape{m, k}, 7), b(Shape{k, n}, 8), c(Shape{m, n}, 9);
    cpu().gemm_bf16(ta, false, a.cv(), b.cv(), 0.5f, c.cv());
    gpu().gemm_bf16(ta, false, a.gv(), b.gv(), 0.5f, c.gv());
    check_pair(c, "gemm_bf16", 1e-4);
  }
}

TEST_CASE("cuda parity: cross-entropy from logits over a vocabulary (one block per example)") {
  SKIP_WITHOUT_GPU();
  const int64_t n = 33, k = 5000;
  const Pair y = labels(n, k, 1);
  Pair z(Shape{n, k}, 2, -6, 6), dz(Shape{n, k}, 3), stats(Shape{2}, 4);
  cpu().sparse_cross_entropy(z.cv(), y.cv(), true, 1.0f / n, dz.cv(), stats.cv());
  gpu().sparse_cross_entropy(z.gv(), y.gv(), true, 1.0f / n, dz.gv(), stats.gv());
  check_pair(dz, "cross-entropy gradient");
  check_pair(stats, "cross-entropy loss and correct count");
}

// Dropout included: a mask is drawn per element from the step's seed, the same on both.
TEST_CASE("cuda: a GPT trained 5 steps on cuda:0 ends with the CPU run's weights, in float32 and in bf16") {
  SKIP_WITHOUT_GPU();
  const std::string text = random_text_file("distrain_cuda_gpt.txt", 4000, 3);
  auto run = [&](const char* device, const char* precision) {
    std::string recipe = gpt_recipe(text, "one_device", device, 8, "", 0.1,
                                    fmt::format("steps = 5\nvalidate = false\nprecision = \"{}\"", precision));
    return train_from_text(recipe, temp_dir(fmt::format("distrain_cuda_gpt_{}", precision).c_str()));
  };
  const Trained cpu_f32 = run("\"cpu:0\"", "float32"), gpu_f32 = run("\"cuda:0\"", "float32");
  check_close(cpu_f32.weights, gpu_f32.weights, 1e-4);
  CHECK(gpu_f32.loss == doctest::Approx(cpu_f32.loss).epsilon(1e-4));
  // bf16: a float32 sum that lands on the other side of a bf16 rounding moves that value by
  // 2^-8 of itself, and Adam's normalised steps carry it on: held to 1e-2.
  const Trained cpu_bf16 = run("\"cpu:0\"", "bf16"), gpu_bf16 = run("\"cuda:0\"", "bf16");
  check_close(cpu_bf16.weights, gpu_bf16.weights, 1e-2);
  CHECK(gpu_bf16.loss == doctest::Approx(cpu_bf16.loss).epsilon(1e-2));
}

// zero on two logical devices of one GPU: the replicas' gradients and shards cross the
// data axis through host memory (the hierarchical communicator's staging, no NCCL); with
// offload_optimizer the shards' optimizer state lives in host memory.
TEST_CASE("cuda: a GPT under zero stages 1-3 on two logical devices of one GPU matches zero on two CPU devices, offloaded too") {
  SKIP_WITHOUT_GPU();
  const std::string text = random_text_file("distrain_cuda_gpt.txt", 4000, 3);
  for (const char* stage : {"stage = 1", "stage = 2", "stage = 3", "stage = 2\noffload_optimizer = true"}) {
    INFO(stage);
    const Trained on_cpu = train_from_text(gpt_recipe(text, "zero", "\"cpu:0\", \"cpu:1\"", 4, stage), temp_dir("distrain_cuda_zero_cpu"));
    const Trained on_gpu = train_from_text(gpt_recipe(text, "zero", "\"cuda:0\", \"cuda:0\"", 4, stage), temp_dir("distrain_cuda_zero_gpu"));
    check_close(on_cpu.weights, on_gpu.weights, 1e-4);
    CHECK(on_gpu.loss == doctest::Approx(on_cpu.loss).epsilon(1e-4));
  }
}

// The mesh's ranks as threads sharing cuda:0: every axis's activations, gradients and
// messages go through host copies (Mesh::staged), against the same layout on CPU devices.
TEST_CASE("cuda: a GPT on the mesh, its thread ranks sharing one GPU (tensor, sequence parallel, pipeline, ZeRO-1), matches the CPU's") {
  SKIP_WITHOUT_GPU();
  const std::string text = random_text_file("distrain_cuda_gpt.txt", 4000, 3);
  for (const auto& [shape, keys] : kEveryAxisLayouts) {
    INFO(shape.str() << "; " << std::string(keys));
    auto run = [&](const char* device) {
      return train_on_thread_mesh(gpt_recipe(text, "mesh", device, 8 / shape.data, mesh_keys(shape, keys)),
                                  temp_dir(fmt::format("distrain_cuda_mesh_{}", device[1]).c_str()), shape);
    };
    const Trained on_cpu = run("\"cpu:0\""), on_gpu = run("\"cuda:0\"");
    check_close(on_cpu.weights, on_gpu.weights, 1e-4);
    CHECK(on_gpu.loss == doctest::Approx(on_cpu.loss).epsilon(1e-4));
  }
}

}  // namespace distrain::test
