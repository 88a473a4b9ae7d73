// The CUDA backend against its CPU twin: every op on the same random inputs (relative
// error under 1e-5, float32 without TF32), a short training run, and the strategy
// equivalence on logical devices of one GPU. Where no GPU is present (or the build has
// no CUDA) the GPU cases say so and skip; the recipe checks below run everywhere.
#include <cmath>
#include <filesystem>
#include <functional>

#include "tests/unit/cuda_pair.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

}  // namespace

TEST_CASE("cuda parity: gemm in all four transpose cases, bias, relu, scale_shift, axpby, dropout") {
  SKIP_WITHOUT_GPU();
  const int64_t m = 37, k = 29, n = 23;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Pair a(ta ? Shape{k, m} : Shape{m, k}, 1), b(tb ? Shape{n, k} : Shape{k, n}, 2), c(Shape{m, n}, 3);
      cpu().gemm(ta, tb, 0.7f, a.cv(), b.cv(), 0.3f, c.cv());
      gpu().gemm(ta, tb, 0.7f, a.gv(), b.gv(), 0.3f, c.gv());
      check_pair(c, ta ? (tb ? "gemm TT" : "gemm TN") : (tb ? "gemm NT" : "gemm NN"));
    }
  Pair y(Shape{1000, 37}, 4), bias(Shape{37}, 5), db(Shape{37}, 6);
  cpu().add_bias(y.cv(), bias.cv());
  gpu().add_bias(y.gv(), bias.gv());
  check_pair(y, "add_bias");
  cpu().bias_grad(y.cv(), db.cv());
  gpu().bias_grad(y.gv(), db.gv());
  check_pair(db, "bias_grad");
  Pair x(Shape{5000}, 7), r(Shape{5000}, 8), g(Shape{5000}, 9);
  cpu().relu(x.cv(), r.cv());
  gpu().relu(x.gv(), r.gv());
  check_pair(r, "relu");
  Pair d(Shape{5000}, 10);
  cpu().relu_backward(r.cv(), g.cv(), d.cv());
  gpu().relu_backward(r.gv(), g.gv(), d.gv());
  check_pair(d, "relu_backward");
  cpu().relu_backward(r.cv(), g.cv(), g.cv());
  gpu().relu_backward(r.gv(), g.gv(), g.gv());
  check_pair(g, "relu_backward in place");
  cpu().scale_shift(x.cv(), r.cv(), 0.25f, -3.0f);
  gpu().scale_shift(x.gv(), r.gv(), 0.25f, -3.0f);
  check_pair(r, "scale_shift");
  cpu().axpby(1.5f, x.cv(), -0.5f, r.cv());
  gpu().axpby(1.5f, x.gv(), -0.5f, r.gv());
  check_pair(r, "axpby");
  cpu().dropout(x.cv(), r.cv(), 0.3f, 1234);
  gpu().dropout(x.gv(), r.gv(), 0.3f, 1234);
  check_pair(r, "dropout (the same mask)", 0.0);
}

TEST_CASE("cuda parity: cross-entropy from logits and from probabilities, mean squared error") {
  SKIP_WITHOUT_GPU();
  const int64_t n = 300, k = 10;
  const Pair y = labels(n, k, 10);
  for (bool from_logits : {true, false}) {
    INFO("from_logits " << from_logits);
    Pair z(Shape{n, k}, 11, from_logits ? -4.0 : 0.01, from_logits ? 4.0 : 1.0);
    Pair dz(Shape{n, k}, 12), stats(Shape{2}, 13);
    cpu().sparse_cross_entropy(z.cv(), y.cv(), from_logits, 1.0f / 512, dz.cv(), stats.cv());
    gpu().sparse_cross_entropy(z.gv(), y.gv(), from_logits, 1.0f / 512, dz.gv(), stats.gv());
    check_pair(dz, "d logits");
    check_pair(stats, "loss sum, correct");
  }
  Pair p(Shape{n, k}, 14), dp(Shape{n, k}, 15), stats(Shape{2}, 16);
  cpu().mean_squared_error(p.cv(), y.cv(), 1.0f / 300, dp.cv(), stats.cv());
  gpu().mean_squared_error(p.gv(), y.gv(), 1.0f / 300, dp.gv(), stats.gv());
  check_pair(dp, "mse gradient");
  check_pair(stats, "mse loss sum, correct");
}

TEST_CASE("cuda parity: SGD with Nesterov momentum and weight decay, AdamW, three steps each") {
  SKIP_WITHOUT_GPU();
  const Shape s{4099};
  Pair w(s, 20), g(s, 21), vel(s, std::vector<float>(4099, 0.0f));
  for (int step = 0; step < 3; ++step) {
    cpu().sgd_update(w.cv(), g.cv(), vel.cv(), SgdHyper{0.1f, 0.9f, 0.01f, true});
    gpu().sgd_update(w.gv(), g.gv(), vel.gv(), SgdHyper{0.1f, 0.9f, 0.01f, true});
  }
  check_pair(w, "sgd weights");
  check_pair(vel, "sgd velocity");
  Pair w2(s, 22), m(s, std::vector<float>(4099, 0.0f)), v(s, std::vector<float>(4099, 0.0f));
  for (int step = 1; step <= 3; ++step) {
    const AdamHyper h{1e-3f, 0.9f, 0.999f, 1e-7f, 0.004f, step};
    cpu().adam_update(w2.cv(), g.cv(), m.cv(), v.cv(), h);
    gpu().adam_update(w2.gv(), g.gv(), m.gv(), v.gv(), h);
  }
  check_pair(w2, "adam weights");
  check_pair(m, "adam m");
  check_pair(v, "adam v");
}

TEST_CASE("cuda parity: conv2d valid, same, same with stride 2 (asymmetric padding), 1x1, forward and both gradients") {
  SKIP_WITHOUT_GPU();
  // The kernel gradient both ways: cuDNN's, and as matrix products of im2col (whole
  // slices of 2048 positions and a tail in the first layer's case).
  for (const char* filter_grad : {"cudnn", "gemm"}) {
    INFO("DISTRAIN_CUDA_FILTER_GRAD=" << filter_grad);
    setenv("DISTRAIN_CUDA_FILTER_GRAD", filter_grad, 1);
    struct Case {
      const char* name;
      Conv2DSpec s;
    };
    // in h, w, c; out h, w, c; kernel; stride; pads top, bottom, left, right; bias; relu
    const Case cases[] = {
        {"3x3 valid, bias + relu", {12, 12, 3, 10, 10, 8, 3, 3, 1, 1, 0, 0, 0, 0, true, true}},
        {"3x3 same", {9, 9, 4, 9, 9, 6, 3, 3, 1, 1, 1, 1, 1, 1, true, false}},
        {"3x3 same stride 2 on 10x10", {10, 10, 5, 5, 5, 7, 3, 3, 2, 2, 0, 1, 0, 1, true, false}},
        {"1x1 no bias", {6, 6, 16, 6, 6, 32, 1, 1, 1, 1, 0, 0, 0, 0, false, false}},
        {"3x3 valid on 28x28x1, a first layer", {28, 28, 1, 26, 26, 32, 3, 3, 1, 1, 0, 0, 0, 0, true, true}},
    };
    for (const Case& c : cases) {
      INFO(c.name);
      const Conv2DSpec& s = c.s;
      const int64_t n = 5;
      Pair x(Shape{n, s.in_h, s.in_w, s.in_c}, 30), w(Shape{s.kernel_h, s.kernel_w, s.in_c, s.out_c}, 31),
          b(Shape{s.out_c}, 32), y(Shape{n, s.out_h, s.out_w, s.out_c}, 33), dy(Shape{n, s.out_h, s.out_w, s.out_c}, 34),
          dx(Shape{n, s.in_h, s.in_w, s.in_c}, 35), dw(Shape{s.kernel_h, s.kernel_w, s.in_c, s.out_c}, 36),
          db(Shape{s.out_c}, 37);
      auto cop = cpu().make_conv2d(s);
      auto gop = gpu().make_conv2d(s);
      const Tensor no_bias;
      cop->forward(x.cv(), w.cv(), s.bias ? b.cv() : no_bias, y.cv());
      gop->forward(x.gv(), w.gv(), s.bias ? b.gv() : no_bias, y.gv());
      check_pair(y, "forward");
      cop->backward_data(dy.cv(), w.cv(), dx.cv());
      gop->backward_data(dy.gv(), w.gv(), dx.gv());
      check_pair(dx, "backward data");
      // dw and db start non-zero: gradients accumulate.
      cop->backward_weights(x.cv(), dy.cv(), Tensor{}, dw.cv(), s.bias ? db.cv() : no_bias);
      gop->backward_weights(x.gv(), dy.gv(), Tensor{}, dw.gv(), s.bias ? db.gv() : no_bias);
      check_pair(dw, "backward weights (accumulated)");
      if (s.bias) check_pair(db, "bias gradient (accumulated)");
      if (!s.relu) continue;
      // A layer without an input gradient gives the op its fused ReLU's output, and the op
      // masks dy itself (dy is spent afterwards; only the weights' gradients compare).
      Pair dy_pre(Shape{n, s.out_h, s.out_w, s.out_c}, 38), dw_masked(Shape{s.kernel_h, s.kernel_w, s.in_c, s.out_c}, 39),
          db_masked(Shape{s.out_c}, 40);
      cop->backward_weights(x.cv(), dy_pre.cv(), y.cv(), dw_masked.cv(), db_masked.cv());
      gop->backward_weights(x.gv(), dy_pre.gv(), y.gv(), dw_masked.gv(), db_masked.gv());
      check_pair(dw_masked, "backward weights through the fused ReLU's mask");
      check_pair(db_masked, "bias gradient through the fused ReLU's mask");
    }
  }
  unsetenv("DISTRAIN_CUDA_FILTER_GRAD");
}

TEST_CASE("cuda parity: max and average pooling with padding and overlapping windows") {
  SKIP_WITHOUT_GPU();
  const Pool2DSpec specs[] = {
      {PoolKind::max, 12, 12, 5, 6, 6, 2, 2, 2, 2, 0, 0, 0, 0},
      {PoolKind::max, 11, 11, 3, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1},
      {PoolKind::average, 7, 7, 4, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1},
      {PoolKind::average, 10, 10, 2, 5, 5, 3, 3, 2, 2, 0, 1, 0, 1},
  };
  for (const Pool2DSpec& s : specs) {
    INFO("pool " << (s.kind == PoolKind::max ? "max" : "avg") << " " << s.kernel_h << "x" << s.kernel_w << " stride "
                 << s.stride_h);
    const int64_t n = 3;
    Pair x(Shape{n, s.in_h, s.in_w, s.channels}, 40), y(Shape{n, s.out_h, s.out_w, s.channels}, 41),
        dy(Shape{n, s.out_h, s.out_w, s.channels}, 42), dx(Shape{n, s.in_h, s.in_w, s.channels}, 43);
    auto cop = cpu().make_pool2d(s);
    auto gop = gpu().make_pool2d(s);
    cop->forward(x.cv(), y.cv(), true);
    gop->forward(x.gv(), y.gv(), true);
    check_pair(y, "forward");
    cop->backward(dy.cv(), dx.cv());
    gop->backward(dy.gv(), dx.gv());
    check_pair(dx, "backward");
  }
}

// Ties go to a window's first cell and a window of -inf still has a winner, on both
// devices: the outputs and the routed gradients are equal, not merely close.
TEST_CASE("cuda parity: max pooling with ties and windows of -inf") {
  SKIP_WITHOUT_GPU();
  for (const Pool2DSpec& s : {Pool2DSpec{PoolKind::max, 8, 8, 3, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0},
                              Pool2DSpec{PoolKind::max, 9, 9, 2, 4, 4, 3, 3, 2, 2, 0, 0, 0, 0}}) {
    INFO("kernel " << s.kernel_h << " stride " << s.stride_h);
    const int64_t n = 2;
    std::vector<float> values = random_vector(static_cast<size_t>(n * s.in_h * s.in_w * s.channels), 44, 0.0, 2.0);
    for (float& v : values) v = std::floor(v);  // 0 or 1: ties everywhere
    for (int64_t r = 0; r < 3; ++r)             // the first image's top-left window, every channel: -inf
      for (int64_t c = 0; c < 3 * s.channels; ++c) values[static_cast<size_t>(r * s.in_w * s.channels + c)] = -INFINITY;
    Pair x(Shape{n, s.in_h, s.in_w, s.channels}, values), y(Shape{n, s.out_h, s.out_w, s.channels}, 45),
        dy(Shape{n, s.out_h, s.out_w, s.channels}, 46), dx(Shape{n, s.in_h, s.in_w, s.channels}, 47);
    auto cop = cpu().make_pool2d(s);
    auto gop = gpu().make_pool2d(s);
    cop->forward(x.cv(), y.cv(), true);
    gop->forward(x.gv(), y.gv(), true);
    CHECK(to_host(y.cv()) == to_host(y.gv()));
    CHECK(std::isinf(to_host(y.cv())[0]));
    cop->backward(dy.cv(), dx.cv());
    gop->backward(dy.gv(), dx.gv());
    check_pair(dx, "backward");
    if (s.kernel_h == s.stride_h) CHECK(to_host(dx.cv()) == to_host(dx.gv()));  // each cell gets one window's gradient
  }
}

TEST_CASE("cuda parity: batch norm, training and inference forward, backward with batch and with fixed statistics") {
  SKIP_WITHOUT_GPU();
  const int64_t n = 4, h = 9, w = 9, c = 12;
  Pair x(Shape{n, h, w, c}, 50, -2.0, 3.0), gamma(Shape{c}, 51), beta(Shape{c}, 52), y(Shape{n, h, w, c}, 53),
      mean(Shape{c}, 54), var(Shape{c}, 55), dy(Shape{n, h, w, c}, 56), dx(Shape{n, h, w, c}, 57), dg(Shape{c}, 58),
      dbeta(Shape{c}, 59);
  auto cop = cpu().make_batch_norm(c, 1e-3f);
  auto gop = gpu().make_batch_norm(c, 1e-3f);
  cop->forward_training(x.cv(), gamma.cv(), beta.cv(), y.cv(), mean.cv(), var.cv(), nullptr);
  gop->forward_training(x.gv(), gamma.gv(), beta.gv(), y.gv(), mean.gv(), var.gv(), nullptr);
  check_pair(mean, "batch mean");
  check_pair(var, "batch variance");
  check_pair(y, "training forward");
  for (bool fixed : {false, true}) {
    INFO("fixed statistics " << fixed);
    cop->backward(x.cv(), dy.cv(), gamma.cv(), mean.cv(), var.cv(), fixed, dx.cv(), dg.cv(), dbeta.cv(), nullptr);
    gop->backward(x.gv(), dy.gv(), gamma.gv(), mean.gv(), var.gv(), fixed, dx.gv(), dg.gv(), dbeta.gv(), nullptr);
    check_pair(dx, "dx");
    check_pair(dg, "dgamma (accumulated)");
    check_pair(dbeta, "dbeta (accumulated)");
  }
  cop->forward_inference(x.cv(), gamma.cv(), beta.cv(), mean.cv(), var.cv(), y.cv());
  gop->forward_inference(x.gv(), gamma.gv(), beta.gv(), mean.gv(), var.gv(), y.gv());
  check_pair(y, "inference forward");
}

namespace {

std::string gpu_recipe(const std::string& strategy, const std::string& devices, int per_replica,
                       const std::string& extra_strategy = "") {
  return fmt::format(R"(
name = "cuda"
seed = 11
[data]
dataset = "synthetic"
train_examples = 256
test_examples = 64
image_shape = [14, 14, 1]
shuffle = false
[model]
input_shape = [14, 14, 1]
layers = [
  {{ type = "rescaling", scale = 0.00392156862745098 }},
  {{ type = "conv2d", filters = 6, kernel_size = 3, activation = "relu" }},
  {{ type = "batch_norm" }},
  {{ type = "max_pool2d" }},
  {{ type = "conv2d", filters = 8, kernel_size = 3, strides = 2, padding = "same", activation = "relu" }},  # 6x6 -> 3x3: asymmetric padding
  {{ type = "flatten" }},
  {{ type = "dense", units = 16, activation = "relu" }},
  {{ type = "dense", units = 10 }},
]
[optimizer]
type = "adam"
learning_rate = 0.002
[optimizer.schedule]
base_batch = 32
[strategy]
name = "{}"
devices = [{}]
per_replica_batch = {}
check_every = 1
{}
[train]
steps = 8
validate = false
)",
                     strategy, devices, per_replica, extra_strategy);
}

}  // namespace

TEST_CASE("cuda: 8 training steps on cuda:0 end with the CPU run's weights and loss") {
  SKIP_WITHOUT_GPU();
  const Trained on_cpu = train_from_text(gpu_recipe("one_device", "\"cpu:0\"", 32), temp_dir("distrain_cuda_cpu"));
  const Trained on_gpu = train_from_text(gpu_recipe("one_device", "\"cuda:0\"", 32), temp_dir("distrain_cuda_gpu"));
  check_close(on_cpu.weights, on_gpu.weights, 1e-4);
  CHECK(on_gpu.loss == doctest::Approx(on_cpu.loss).epsilon(1e-4));
}

// Batch norm normalises each replica's slice with that slice's statistics, so two replicas
// of 16 match one_device on 32 only under sync_batch_norm; otherwise the GPU's logical
// devices are held to the CPU's.
TEST_CASE("cuda: mirrored and central_storage on two logical devices of one GPU match the same on two CPU devices") {
  SKIP_WITHOUT_GPU();
  for (const char* ops : {"hierarchical_copy", "reduce_to_one_device"}) {
    INFO(ops);
    const std::string extra = fmt::format("cross_device_ops = \"{}\"", ops);
    const auto on_cpu = train_from_text(gpu_recipe("mirrored", "\"cpu:0\", \"cpu:1\"", 16, extra), temp_dir("distrain_cpu_mirrored"));
    const auto on_gpu = train_from_text(gpu_recipe("mirrored", "\"cuda:0\", \"cuda:0\"", 16, extra), temp_dir("distrain_cuda_mirrored"));
    check_close(on_cpu.weights, on_gpu.weights, 1e-4);
  }
  const auto on_cpu = train_from_text(gpu_recipe("central_storage", "\"cpu:0\", \"cpu:1\"", 16), temp_dir("distrain_cpu_central"));
  const auto on_gpu = train_from_text(gpu_recipe("central_storage", "\"cuda:0\", \"cuda:0\"", 16), temp_dir("distrain_cuda_central"));
  check_close(on_cpu.weights, on_gpu.weights, 1e-4);
}

// Regression: batch norm held the GPU's lock while its statistics waited for the other
// replica, which needed that lock to get there (a hang with two logical devices).
TEST_CASE("cuda: mirrored with sync_batch_norm on two logical devices of one GPU matches one_device with the global batch") {
  SKIP_WITHOUT_GPU();
  const auto single = train_from_text(gpu_recipe("one_device", "\"cuda:0\"", 32), temp_dir("distrain_cuda_one"));
  const auto sync_bn = train_from_text(gpu_recipe("mirrored", "\"cuda:0\", \"cuda:0\"", 16,
                                           "cross_device_ops = \"hierarchical_copy\"\nsync_batch_norm = true"),
                                temp_dir("distrain_cuda_sync_bn"));
  check_close(single.weights, sync_bn.weights, 1e-5);
}

// The dataset kept on the GPU (data.placement, DeviceData) trains as batches built and
// uploaded by the host do; algorithms are found per run, hence a tolerance.
TEST_CASE("cuda: data.placement = device trains as host does, on one device and two logical devices") {
  SKIP_WITHOUT_GPU();
  for (const char* devices : {"\"cuda:0\"", "\"cuda:0\", \"cuda:0\""}) {
    INFO(devices);
    const std::string strategy = std::string(devices).find(',') == std::string::npos ? "one_device" : "mirrored";
    auto placed = [&](const char* where) {
      std::string t = gpu_recipe(strategy, devices, 16);
      t.replace(t.find("[data]\n"), 7, fmt::format("[data]\nplacement = \"{}\"\n", where));
      return train_from_text(t, temp_dir(fmt::format("distrain_cuda_placement_{}", where).c_str())).weights;
    };
    check_close(placed("host"), placed("device"), 1e-6);
  }
}

TEST_CASE("cuda parity: gather_examples from uint8, float32 and int32 tables") {
  SKIP_WITHOUT_GPU();
  const Shape table{50, 3, 4};
  std::vector<uint8_t> bytes(static_cast<size_t>(table.numel()));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 % 256);
  const std::vector<float> floats = random_vector(bytes.size(), 41, -3, 3);
  std::vector<int32_t> labels(50), rows{49, 0, 17, 17, 3};
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i * 3 % 10);
  Buffer rows_g(gpu(), Shape{5}, DType::i32), out_g(gpu(), Shape{5, 3, 4}), labels_out_g(gpu(), Shape{5}, DType::i32);
  gpu().upload(rows.data(), rows_g.view());
  const Tensor rows_c{rows.data(), Shape{5}, DType::i32, Device{}};
  std::vector<float> want(60);
  for (DType dt : {DType::u8, DType::f32}) {
    INFO(dtype_name(dt));
    Buffer table_g(gpu(), table, dt);
    void* host = dt == DType::u8 ? static_cast<void*>(bytes.data()) : const_cast<float*>(floats.data());
    gpu().upload(host, table_g.view());
    cpu().gather_examples(Tensor{host, table, dt, Device{}}, rows_c, Tensor{want.data(), Shape{5, 3, 4}, DType::f32, Device{}});
    gpu().gather_examples(table_g.view(), rows_g.view(), out_g.view());
    CHECK(to_host(out_g.view()) == want);
  }
  Buffer labels_g(gpu(), Shape{50}, DType::i32);
  gpu().upload(labels.data(), labels_g.view());
  gpu().gather_examples(labels_g.view(), rows_g.view(), labels_out_g.view());
  std::vector<int32_t> got(5);
  gpu().download(labels_out_g.view(), got.data());
  CHECK(got == std::vector<int32_t>{labels[49], labels[0], labels[17], labels[17], labels[3]});
}

TEST_CASE("cuda: the nccl communicator with one rank (one GPU) leaves every collective's data as it was") {
  SKIP_WITHOUT_GPU();
  auto comms = cuda_plugin().nccl_local({&gpu()});
  REQUIRE(comms.size() == 1);
  std::vector<float> v{1, 2, 3, 4};
  Buffer t(gpu(), Shape{4}), out(gpu(), Shape{4});
  gpu().upload(v.data(), t.view());
  comms[0]->all_reduce(t.view(), ReduceOp::sum);
  comms[0]->broadcast(t.view(), 0);
  comms[0]->all_gather(t.view(), out.view());
  CHECK(to_host(out.view()) == v);
  comms[0]->reduce_scatter(t.view(), out.view(), ReduceOp::sum);
  CHECK(to_host(out.view()) == v);
  comms[0]->barrier();
}

TEST_CASE("recipes: GPU device lists are checked before anything runs") {
  auto error_of = [](const std::string& text) -> std::string {
    try {
      parse_recipe(text, "gpu.toml");
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(error_of(gpu_recipe("mirrored", "\"cuda:0\", \"cuda:0\"", 16, "cross_device_ops = \"nccl\"")).find("NCCL refuses two ranks on one GPU") !=
        std::string::npos);
  CHECK(error_of(gpu_recipe("mirrored", "\"cuda:0\", \"cuda:0\"", 16, "cross_device_ops = \"hierarchical_copy\"")).empty());
  CHECK(error_of(gpu_recipe("mirrored", "\"cpu:0\", \"cpu:0\"", 16)).find("cpu:0 is listed twice") != std::string::npos);
  CHECK(error_of(gpu_recipe("multi_worker_mirrored", "\"cuda:0\", \"cuda:0\"", 16))
            .find("only mirrored, central_storage and zero share a GPU") != std::string::npos);
  CHECK(error_of(gpu_recipe("zero", "\"cuda:0\", \"cuda:0\"", 16, "stage = 2")).empty());
  CHECK(error_of(gpu_recipe("parameter_server", "\"cuda:0\"", 16)).empty());
  CHECK(error_of(gpu_recipe("mesh", "\"cuda:0\"", 16, "tensor = 2")).empty());
  CHECK(error_of(gpu_recipe("one_device", "\"cuda:0\"", 16) + "allow_tf32 = \"yes\"\n").find("train.allow_tf32") !=
        std::string::npos);
}

}  // namespace distrain::test
