// Smoke test of the whole engine: the seed CNN trains on the Fashion-MNIST training
// files for a few hundred steps and its loss falls clearly.
#include <filesystem>

#include "core/model/loss.hpp"
#include "core/model/model.hpp"
#include "core/optim/optimizer.hpp"
#include "core/optim/weight_decay.hpp"
#include "datasets/idx.hpp"
#include "datasets/loader.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {

TEST_CASE("smoke: seed CNN on Fashion-MNIST, 300 steps of Adam, loss falls clearly") {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(dir)) {
    MESSAGE("[skipped] " << dir << " missing: apt-get install dataset-fashion-mnist");
    return;
  }
  const Dataset data = read_idx_split(dir, "train");
  const toml::table model_table = toml::parse(R"(
input_shape = [28, 28, 1]
layers = [
  { type = "rescaling", scale = 0.00392156862745098 },
  { type = "conv2d", filters = 32, kernel_size = 3, activation = "relu" },
  { type = "max_pool2d" },
  { type = "conv2d", filters = 64, kernel_size = 3, activation = "relu" },
  { type = "max_pool2d" },
  { type = "flatten" },
  { type = "dense", units = 64, activation = "relu" },
  { type = "dense", units = 10 },
])");
  Backend& be = cpu();
  Model model(parse_model_spec(model_table, "smoke"), be);
  model.params().initialize(1);
  Loss loss(LossSpec{}, be);
  auto opt = make_optimizer(default_optimizer_spec("adam"));
  opt->bind(be, model.params().values().numel(), decayed_ranges(model.params()));

  Loader loader(data, LoaderSpec{64, 1, true, true, 1});
  loader.start(0);
  Buffer x(be, Shape{64, 28, 28, 1}), y(be, Shape{64}, DType::i32);
  double first = 0, last = 0;
  const int steps = 300, window = 50;
  for (int step = 0; step < steps; ++step) {
    auto batch = loader.next();
    REQUIRE(batch);
    be.upload(batch->replicas[0].images.data(), x.view());
    be.upload(batch->replicas[0].labels.data(), y.view());
    Ctx ctx{be, true, static_cast<uint64_t>(step)};
    model.zero_grads();
    const Tensor out = model.forward(ctx, x.view());
    const LossStats s = loss.compute(out, y.view(), 1.0f / 64, model.output_grad());
    model.backward(ctx);
    opt->update(model.params().values(), model.params().grads(), 0.001f);
    if (step < window) first += s.loss_sum / 64 / window;
    if (step >= steps - window) last += s.loss_sum / 64 / window;
  }
  MESSAGE("mean loss, first " << window << " steps: " << first << ", last " << window << ": " << last);
  CHECK(first > 1.0);
  CHECK(last < 0.6);
  CHECK(last < 0.45 * first);
}

}  // namespace distrain::test
