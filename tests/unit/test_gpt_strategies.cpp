// A GPT (token embedding, two transformer blocks with residual adds and causal attention,
// an output head tied to the embedding) under every in-process data-parallel strategy:
// K steps of R replicas x b windows give one_device's weights with R*b windows, and a run
// stopped mid-epoch and resumed ends bitwise where an uninterrupted one does.
//
// Attention dropout stays 0 against one_device, by design: a mask is a function of (step
// seed, layer, element); one_device draws it with the step's seed over the whole batch,
// each replica of mirrored / central_storage / zero with derive_seed(step seed, replica)
// over its own slice, so the masks (and the weights) differ; with dropout the
// multi-replica strategies are compared with mirrored instead.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>

#include "core/plan/mesh_plan.hpp"
#include "core/base/json.hpp"
#include "core/comm/mesh.hpp"
#include "core/io/recipe.hpp"
#include "core/strategy/replica_threads.hpp"
#include "core/strategy/strategy.hpp"
#include "core/strategy/zero_memory.hpp"
#include "core/train/trainer.hpp"
#include "tests/unit/gpt_fixture.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

struct Run {
  const char* strategy;
  const char* extra;  // [strategy] keys
};
const Run kCentralAndZero[] = {Run{"central_storage", ""}, Run{"zero", "stage = 1"}, Run{"zero", "stage = 2"},
                               Run{"zero", "stage = 3"}};

}  // namespace

TEST_CASE("gpt: mirrored, central_storage and zero stages 1-3 with R replicas x b match one_device with R*b (R = 2, 4)") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  std::vector<Run> runs{Run{"mirrored", ""}};
  runs.insert(runs.end(), std::begin(kCentralAndZero), std::end(kCentralAndZero));
  for (int r : {2, 4}) {
    INFO("replicas " << r);
    const std::string devices = cpu_devices(r);
    const auto single = train_from_text(gpt_recipe(text, "one_device", "\"cpu:0\"", 4 * r), (tmp / "distrain_gpt_one").string());
    CHECK(std::isfinite(single.loss));
    for (const Run& run : runs) {
      INFO(run.strategy << " " << run.extra);
      const auto other = train_from_text(gpt_recipe(text, run.strategy, devices, 4, run.extra), (tmp / "distrain_gpt_other").string());
      check_close(single.weights, other.weights);
      CHECK(other.loss == doctest::Approx(single.loss).epsilon(1e-5));
    }
  }
}

// With attention dropout every multi-replica strategy draws replica r's masks from
// derive_seed(step seed, r) over its own slice, as mirrored does: they agree with each
// other (one_device, drawing over the whole batch, does not: 1.7e-2 of the largest weight).
TEST_CASE("gpt: with attention dropout 0.1, central_storage and zero stages 1-3 match mirrored (R = 2, 4)") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  for (int r : {2, 4}) {
    INFO("replicas " << r);
    const std::string devices = cpu_devices(r);
    const auto mirrored = train_from_text(gpt_recipe(text, "mirrored", devices, 4, "", 0.1), (tmp / "distrain_gpt_mirrored").string());
    for (const Run& run : kCentralAndZero) {
      INFO(run.strategy << " " << run.extra);
      const auto other =
          train_from_text(gpt_recipe(text, run.strategy, devices, 4, run.extra, 0.1), (tmp / "distrain_gpt_other").string());
      check_close(mirrored.weights, other.weights);
    }
  }
}

// The global norm is of the reduced gradients wherever they are (a shard each under ZeRO),
// so every layout scales by one_device's factor; the clip (0.05) is below every step's norm.
TEST_CASE("gpt: optimizer.clip_norm: mirrored, central_storage and zero stages 1-3 clip as one_device, same norm in metrics") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  auto clipped = [](std::string recipe) {
    const std::string key = "weight_decay = 0.1\n";
    return recipe.replace(recipe.find(key), key.size(), key + "clip_norm = 0.05\n");
  };
  auto grad_norm = [](const fs::path& dir) {
    std::ifstream in(dir / "metrics.jsonl");
    std::string line;
    std::getline(in, line);
    const Json j = Json::parse(line);
    return j.at("grad_norm").is_null() ? -1.0 : j.at("grad_norm").get<double>();
  };
  const fs::path one = tmp / "distrain_gpt_clip_one", other_dir = tmp / "distrain_gpt_clip_other";
  const auto unclipped = train_from_text(gpt_recipe(text, "one_device", "\"cpu:0\"", 8), one.string());
  CHECK(grad_norm(one) < 0);  // null without clip_norm
  const auto single = train_from_text(clipped(gpt_recipe(text, "one_device", "\"cpu:0\"", 8)), one.string());
  const double norm = grad_norm(one);
  CHECK(norm > 0.05);
  double moved = 0;  // clipping changed the steps
  for (size_t i = 0; i < single.weights.size(); ++i)
    moved = std::max(moved, static_cast<double>(std::abs(single.weights[i] - unclipped.weights[i])));
  CHECK(moved > 1e-4);
  std::vector<Run> runs{Run{"mirrored", ""}};
  runs.insert(runs.end(), std::begin(kCentralAndZero), std::end(kCentralAndZero));
  for (const Run& run : runs) {
    INFO(run.strategy << " " << run.extra);
    const auto other = train_from_text(clipped(gpt_recipe(text, run.strategy, cpu_devices(2), 4, run.extra)), other_dir.string());
    check_close(single.weights, other.weights);
    CHECK(grad_norm(other_dir) == doctest::Approx(norm).epsilon(1e-5));
  }
}

// train.accumulate_steps = 2 sums two micro-batches' gradients, each a pass of its own:
// the step is one_device's with the whole batch, under every layout (ZeRO-2/3 reduce each
// micro-batch into their shard).
TEST_CASE("gpt: accumulate_steps = 2 under one_device, mirrored, central_storage and zero 1-3 matches one step on the batch") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  const std::string accumulate = "steps = 5\nvalidate = false\naccumulate_steps = 2";
  const auto single = train_from_text(gpt_recipe(text, "one_device", "\"cpu:0\"", 8), (tmp / "distrain_gpt_acc_one").string());
  const auto micro =
      train_from_text(gpt_recipe(text, "one_device", "\"cpu:0\"", 4, "", 0.0, accumulate), (tmp / "distrain_gpt_acc").string());
  check_close(single.weights, micro.weights);
  CHECK(micro.loss == doctest::Approx(single.loss).epsilon(1e-5));
  std::vector<Run> runs{Run{"mirrored", ""}};
  runs.insert(runs.end(), std::begin(kCentralAndZero), std::end(kCentralAndZero));
  for (const Run& run : runs) {
    INFO(run.strategy << " " << run.extra);
    const auto other = train_from_text(gpt_recipe(text, run.strategy, cpu_devices(2), 2, run.extra, 0.0, accumulate),
                                       (tmp / "distrain_gpt_acc_other").string());
    check_close(single.weights, other.weights);
    CHECK(other.loss == doctest::Approx(single.loss).epsilon(1e-5));
  }
}

// zero 2 under bf16 checkpoints its float32 masters and makes its bf16 copies from them again.
TEST_CASE("gpt: exact resume, one_device, mirrored and zero 2 in bf16 with attention dropout, stopped mid-epoch, ends bitwise identical") {
  const fs::path tmp = fs::temp_directory_path();
  // 1,200 characters: 1,080 train (67 windows of 16, 9 batches of 8, the last of 3) and
  // 120 validate; 2 epochs are 18 steps, a checkpoint every 4.
  const std::string text = random_text_file("distrain_gpt_resume.txt", 1200, 23);
  const std::string schedule = "epochs = 2\neval_batch = 4\n[checkpoint]\nevery_steps = 4\nkeep = 2";
  struct Layout {
    const char* strategy;
    const char* devices;
    int per_replica;
    const char* keys = "";   // strategy
    const char* train = "";  // train
  };
  for (const Layout& run : {Layout{"one_device", "\"cpu:0\"", 8}, Layout{"mirrored", "\"cpu:0\", \"cpu:1\"", 4},
                            Layout{"zero", "\"cpu:0\", \"cpu:1\"", 4, "stage = 2", "precision = \"bf16\"\n"}}) {
    INFO(run.strategy);
    const Recipe recipe = parse_recipe(
        gpt_recipe(text, run.strategy, run.devices, run.per_replica, run.keys, 0.1, run.train + schedule), "gpt_resume.toml");
    const fs::path a = tmp / "distrain_gpt_resume_a", b = tmp / "distrain_gpt_resume_b";
    fs::remove_all(a);
    fs::remove_all(b);
    const TrainSummary full = train(recipe, quiet(a.string()));
    CHECK(full.steps == 18);

    TrainOptions crash = quiet(b.string());
    crash.crash_after_step = 14;  // after the checkpoint of step 12, inside epoch 2
    train(recipe, crash);
    CHECK(list_checkpoints(b.string()).back() == (b / "ckpt-000012.h5").string());
    const fs::path log = tmp / "distrain_gpt_resume_b.log";
    TrainOptions again = quiet(b.string());
    std::fclose(again.out);
    again.out = std::fopen(log.c_str(), "w");
    const TrainSummary resumed = train(recipe, again);
    std::fclose(again.out);
    std::ifstream in(log);
    const std::string printed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Resumed, not started afresh: its progress begins inside epoch 2 (a fresh run would say
    // epoch 1 first, and end with the same weights).
    CHECK(printed.rfind("epoch 2/2 batch 4/9 ", 0) == 0);
    CHECK(printed.find("epoch 1/2") == std::string::npos);
    CHECK(resumed.steps == 18);
    CHECK(resumed.loss == full.loss);
    CHECK(resumed.val_loss == full.val_loss);
    CHECK(checkpoint_values(recipe, full.last_checkpoint) == checkpoint_values(recipe, resumed.last_checkpoint));
    CHECK(untimed_metrics(a / "metrics.jsonl").size() == 2);
    CHECK(untimed_metrics(a / "metrics.jsonl") == untimed_metrics(b / "metrics.jsonl"));
  }
}

// train.recompute = "blocks" reruns each block's forward in backward with the same step
// seed: the same numbers in the same order, so the weights are bitwise those of "none",
// attention dropout included, on one stage or under zero 3's gathers; the activations
// kept per replica shrink to the blocks' outputs and one block's.
TEST_CASE("gpt: train.recompute = blocks trains bitwise as none (one_device with dropout, mirrored, zero 3), keeping fewer activations") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  const std::string plain = "steps = 5\nvalidate = false", again = plain + "\nrecompute = \"blocks\"";
  struct Layout {
    const char* strategy;
    int replicas;
    const char* extra;
  };
  for (const Layout& l : {Layout{"one_device", 1, ""}, Layout{"mirrored", 2, ""}, Layout{"zero", 2, "stage = 3"}}) {
    INFO(l.strategy);
    const int batch = 8 / l.replicas;
    const auto none = train_from_text(gpt_recipe(text, l.strategy, cpu_devices(l.replicas), batch, l.extra, 0.1, plain),
                                      (tmp / "distrain_gpt_rc_none").string());
    const auto blocks = train_from_text(gpt_recipe(text, l.strategy, cpu_devices(l.replicas), batch, l.extra, 0.1, again),
                                        (tmp / "distrain_gpt_rc_blocks").string());
    CHECK(none.weights == blocks.weights);
    CHECK(none.loss == blocks.loss);
  }
  const Recipe with = parse_recipe(gpt_recipe(text, "one_device", "\"cpu:0\"", 8, "", 0.0, again), "rc.toml");
  const Recipe without = parse_recipe(gpt_recipe(text, "one_device", "\"cpu:0\"", 8, "", 0.0, plain), "rc.toml");
  const auto a = make_strategy(with), b = make_strategy(without);
  // Kept: the embeddings, 2 block outputs, ln_f and the head, plus one block's inner layers
  // (525824 bytes for 8 windows with the gradients' buffers); without: all 20 layers'
  // (741888). The head's output, wider than the blocks', is a large share of both.
  CHECK(a->model().activation_bytes(8) * 4 < b->model().activation_bytes(8) * 3);
}

TEST_CASE("gpt: train.recompute = blocks needs a repeat block, and no batch norm inside one") {
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  std::string flat = gpt_recipe(text, "one_device", "\"cpu:0\"", 8, "", 0.0, "steps = 5\nrecompute = \"blocks\"");
  const std::string repeat = "type = \"repeat\"\nname = \"h\"\ncount = 2\n";
  flat.replace(flat.find(repeat), repeat.size(), "type = \"repeat\"\nname = \"h\"\ncount = 1\n");
  CHECK_NOTHROW(parse_recipe(flat, "rc.toml"));  // one block is still a block
  const std::string mlp = R"(
name = "mlp"
[data]
dataset = "synthetic"
train_examples = 64
test_examples = 16
image_shape = [2, 2, 1]
num_classes = 3
[model]
input_shape = [2, 2, 1]
layers = [{ type = "flatten" }, { type = "dense", units = 3 }]
[train]
recompute = "blocks"
)";
  CHECK_THROWS_WITH_AS(parse_recipe(mlp, "mlp.toml"),
                       "mlp.toml: train.recompute = \"blocks\" reruns each repeat block's forward in backward, and [model] has no "
                       "repeat block; use \"none\"",
                       UserError);
  const toml::table bn = toml::parse(R"(
input_shape = [4, 4, 1]
[[layers]]
type = "repeat"
name = "r"
count = 2
  [[layers.layers]]
  type = "conv2d"
  filters = 1
  kernel_size = 1
  [[layers.layers]]
  type = "batch_norm"
)");
  Model m(parse_model_spec(bn, "bn.toml"), cpu());
  CHECK_THROWS_WITH_AS(m.set_recompute(true), doctest::Contains("layer 'r.0.batch_norm_1' (batch_norm) in a repeat block"),
                       UserError);
}

// The recipe with byte tokens (256): its embedding, not attention, is then the largest layer.
std::string with_bytes(std::string recipe) {
  for (const auto& [from, to] : {std::pair{"vocabulary = \"characters\"", "vocabulary = \"bytes\""},
                                 std::pair{"input_dim = 27", "input_dim = 256"}, std::pair{"units = 27", "units = 256"}}) {
    const size_t at = recipe.find(from);
    REQUIRE(at != std::string::npos);
    recipe.replace(at, std::string(from).size(), to);
  }
  return recipe;
}

// `distrain plan` weighs zero layouts without building them: the storage-free prediction
// is byte for byte what the built strategy holds, at every stage, offloaded or not, in
// float32 and bf16, whichever layer is the largest.
TEST_CASE("gpt: zero_memory_per_replica predicts the built strategy's memory at every stage") {
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  const auto check_stage = [&](int replicas, const std::string& strategy_keys, const std::string& train) {
    const std::string gpt = gpt_recipe(text, "zero", cpu_devices(replicas), 4, strategy_keys, 0.0, "steps = 5\n" + train);
    const Recipe recipe = parse_recipe(replicas == 3 ? with_bytes(gpt) : gpt, "z.toml");
    INFO(replicas << " replicas" << (replicas == 3 ? " (byte tokens)" : "") << ", " << strategy_keys << ", " << train);
    const MemoryUse built = make_strategy(recipe)->memory_per_replica(recipe.strategy.per_replica_batch);
    const MemoryUse predicted = zero_memory_per_replica(recipe, replicas);
    CHECK(predicted.parameters == built.parameters);
    CHECK(predicted.gradients == built.gradients);
    CHECK(predicted.optimizer == built.optimizer);
    CHECK(predicted.activations == built.activations);
    CHECK(predicted.offloaded == built.offloaded);
  };
  for (const int replicas : {2, 3})
    for (const char* stage : {"stage = 1", "stage = 2", "stage = 3"})
      for (const char* offload : {"", "\noffload_optimizer = true"})
        for (const char* train : {"recompute = \"blocks\"", "precision = \"bf16\""})
          check_stage(replicas, std::string(stage) + offload, train);
}

// strategy.offload_optimizer keeps Adam's moments in host memory and updates there with the
// same kernel: bitwise the weights of the device's update, under every ZeRO stage; the
// devices hold no optimizer state, so their predicted bytes drop by its size.
TEST_CASE("gpt: offload_optimizer under zero stages 1-3 trains bitwise as on the device, the state in host memory") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  for (const char* stage : {"stage = 1", "stage = 2", "stage = 3"}) {
    INFO(stage);
    const auto device = train_from_text(gpt_recipe(text, "zero", cpu_devices(2), 4, stage), (tmp / "distrain_gpt_off_a").string());
    const std::string offloaded = std::string(stage) + "\noffload_optimizer = true";
    const auto host = train_from_text(gpt_recipe(text, "zero", cpu_devices(2), 4, offloaded), (tmp / "distrain_gpt_off_b").string());
    CHECK(device.weights == host.weights);
    const auto on_device = make_strategy(parse_recipe(gpt_recipe(text, "zero", cpu_devices(2), 4, stage), "z.toml"));
    const auto on_host = make_strategy(parse_recipe(gpt_recipe(text, "zero", cpu_devices(2), 4, offloaded), "z.toml"));
    const MemoryUse a = on_device->memory_per_replica(4), b = on_host->memory_per_replica(4);
    CHECK(b.optimizer == 0);
    CHECK(b.offloaded == a.optimizer);
    CHECK(a.offloaded == 0);
    for (const auto& [name, slot] : on_host->optimizer().slots()) CHECK(slot.device == Device::host());
  }
  // Under a strategy that does not offload, the key is dropped with a notice (a zero recipe run as mirrored).
  const Recipe mirrored = parse_recipe(gpt_recipe(text, "mirrored", cpu_devices(2), 4, "offload_optimizer = true"), "m.toml");
  CHECK_FALSE(mirrored.strategy.offload_optimizer());
  REQUIRE(mirrored.notices.size() == 1);
  CHECK(mirrored.notices[0].find("strategy.offload_optimizer (zero, mesh only): ignored") != std::string::npos);
}



// train.precision = "bf16" rounds the operands of every dense and attention product: the
// weights leave float32's by more than summation order would, and the loss stays close.
// (Strategies under bf16 against one_device under bf16: the next case, and tests/dist.)
TEST_CASE("gpt: train.precision = bf16 stays near float32 (loss within 2%)") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  const std::string f32 = "steps = 5\nvalidate = false", bf16 = f32 + "\nprecision = \"bf16\"";
  const auto single = train_from_text(gpt_recipe(text, "one_device", "\"cpu:0\"", 8, "", 0.0, f32),
                                      (tmp / "distrain_gpt_f32").string());
  const auto single16 = train_from_text(gpt_recipe(text, "one_device", "\"cpu:0\"", 8, "", 0.0, bf16),
                                        (tmp / "distrain_gpt_bf16").string());
  CHECK(single16.loss == doctest::Approx(single.loss).epsilon(0.02));
  CHECK(single16.loss != single.loss);
  double moved = 0, scale = 0;
  for (size_t i = 0; i < single.weights.size(); ++i) {
    moved = std::max(moved, static_cast<double>(std::abs(single16.weights[i] - single.weights[i])));
    scale = std::max(scale, static_cast<double>(std::abs(single.weights[i])));
  }
  INFO("bf16 moved the weights by " << moved / scale << " of the largest");
  CHECK(moved > 1e-5 * scale);  // float32 strategies agree within 1e-5 of the largest weight
}

// Under bf16 zero keeps float32 masters of each shard (in host memory with offload_optimizer)
// and shares their bf16 rounding: stages 1 and 2 hold the whole values in bf16, stage 3
// gathers each layer in bf16. Every layout reads the same rounded parameters (one_device
// rounds a copy of each layer's as it runs), so each stage keeps to one_device in bf16, and
// offloaded masters update bitwise as on the device.
TEST_CASE("gpt: zero under bf16 keeps float32 masters and shares bf16 copies: near one_device, offload bitwise, fewer bytes") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  const std::string f32 = "steps = 5\nvalidate = false", bf16 = f32 + "\nprecision = \"bf16\"";
  const auto single = train_from_text(gpt_recipe(text, "one_device", "\"cpu:0\"", 8, "", 0.0, bf16),
                                      (tmp / "distrain_gpt_bf16_one").string());
  for (const char* stage : {"stage = 1", "stage = 2", "stage = 3"}) {
    INFO(stage);
    const std::string offload = std::string(stage) + "\noffload_optimizer = true";
    const auto device = train_from_text(gpt_recipe(text, "zero", cpu_devices(2), 4, stage, 0.0, bf16),
                                        (tmp / "distrain_gpt_bf16_z").string());
    const auto host = train_from_text(gpt_recipe(text, "zero", cpu_devices(2), 4, offload, 0.0, bf16),
                                      (tmp / "distrain_gpt_bf16_zo").string());
    check_close(single.weights, device.weights, 1e-5);
    CHECK(device.weights == host.weights);
    CHECK(device.loss == doctest::Approx(single.loss).epsilon(1e-3));

    const auto built = [&](const std::string& keys, const std::string& train) {
      return make_strategy(parse_recipe(gpt_recipe(text, "zero", cpu_devices(2), 4, keys, 0.0, train), "z.toml"));
    };
    const auto s32 = built(stage, f32), s16 = built(stage, bf16), off16 = built(offload, bf16);
    const Tensor masters = off16->model().gatherer().own();
    CHECK(masters.device == Device::host());
    CHECK(masters.dtype == DType::f32);
    CHECK(s16->model().gatherer().own().device != Device::host());
    const MemoryUse a = s32->memory_per_replica(4), b = s16->memory_per_replica(4), c = off16->memory_per_replica(4);
    const auto shard = static_cast<int64_t>(masters.bytes());
    CHECK(c.parameters == b.parameters - shard);
    CHECK(c.offloaded == b.optimizer + shard);
    // Whole values at 2 bytes instead of 4 (stages 1, 2); stage 3 holds a bf16 bucket more
    // but no masters once they are offloaded.
    CHECK((std::string(stage) == "stage = 3" ? c.parameters : b.parameters) < a.parameters);
  }
}

// Under bf16 every layer's output but the head's is rounded as it is made and kept at 2
// bytes an element; float32 copies live in a few buffers while layers read them. Rerunning
// blocks makes the same copies at other times: bitwise the same weights, dropout included,
// on one device and under zero 3. This small model keeps fewer bytes of activations in bf16
// than in float32, but not half: its head's float32 output (vocabulary wider than the
// blocks) and attention's float32 projections are a large share of both.
TEST_CASE("gpt: bf16 activations: recompute trains bitwise as none in bf16, keeping fewer bytes than float32") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  const std::string bf16 = "steps = 5\nvalidate = false\nprecision = \"bf16\"", again = bf16 + "\nrecompute = \"blocks\"";
  for (const auto& [strategy, replicas, extra] :
       {std::tuple{"one_device", 1, ""}, std::tuple{"zero", 2, "stage = 3"}}) {
    INFO(strategy);
    const int batch = 8 / replicas;
    const auto none = train_from_text(gpt_recipe(text, strategy, cpu_devices(replicas), batch, extra, 0.1, bf16),
                                      (tmp / "distrain_gpt_bf16_none").string());
    const auto blocks = train_from_text(gpt_recipe(text, strategy, cpu_devices(replicas), batch, extra, 0.1, again),
                                        (tmp / "distrain_gpt_bf16_blocks").string());
    CHECK(none.weights == blocks.weights);
    CHECK(none.loss == blocks.loss);
  }
  const std::string f32 = "steps = 5\nvalidate = false";
  const auto half = make_strategy(parse_recipe(gpt_recipe(text, "one_device", "\"cpu:0\"", 8, "", 0.0, bf16), "a.toml"));
  const auto whole = make_strategy(parse_recipe(gpt_recipe(text, "one_device", "\"cpu:0\"", 8, "", 0.0, f32), "b.toml"));
  // Kept bytes, without the transient buffers: emulated bf16 products (a CPU without
  // AVX512_BF16) hold float32 operand copies, twice the bf16 kernels' on this small model.
  const auto kept = [](const Model& m) { return m.activation_bytes(8) - m.transient_bytes(8); };
  const int64_t a = kept(half->model()), b = kept(whole->model());
  INFO(a << " bytes kept in bf16, " << b << " in float32");
  CHECK(a * 100 < b * 90);
}

TEST_CASE("gpt: train.precision accepts float32 and bf16 only (bfloat16 as PyTorch names it)") {
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  CHECK_THROWS_WITH_AS(parse_recipe(gpt_recipe(text, "one_device", "\"cpu:0\"", 8, "", 0.0, "precision = \"fp16\""), "p.toml"),
                       doctest::Contains("precision"), UserError);
  CHECK(parse_recipe(gpt_recipe(text, "one_device", "\"cpu:0\"", 8, "", 0.0, "precision = \"bfloat16\""), "p.toml")
            .train.matmul_dtype == DType::bf16);
}

}  // namespace distrain::test

namespace distrain::test {

// Every kind of mesh layout in-process, ranks as threads (the MPI runs of tests/dist
// gpt_mesh cover the same over processes): 5 steps give one_device's weights with the same
// global batch of 8. Tensor 2 splits the 2 heads, the MLP as a column/row pair and the
// 27-token vocabulary as 13 + 14; pipeline 2 puts one block on each stage, the last
// keeping a copy of the tied embedding. Largest difference seen: 5.7e-6 of the largest weight.
TEST_CASE("gpt: the mesh on threads (tensor, sequence parallel, pipeline, ZeRO-1, data x tensor x pipeline) matches one_device") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  const auto single = train_from_text(gpt_recipe(text, "one_device", "\"cpu:0\"", 8), (tmp / "distrain_gpt_mesh_one").string());
  const MeshLayout layouts[] = {
      {{1, 2, 1}, ""},
      {{1, 2, 1}, "sequence_parallel = true"},
      {{1, 1, 2}, "micro_batches = 4"},
      {{1, 1, 2}, "micro_batches = 2\nschedule = \"gpipe\""},
      {{2, 1, 1}, "shard_optimizer = true"},
      {{2, 1, 2}, "micro_batches = 2\nshard_optimizer = true\noffload_optimizer = true"},
      {{2, 2, 2}, "micro_batches = 2\nshard_optimizer = true\nsequence_parallel = true"},
  };
  for (const MeshLayout& l : layouts) {
    INFO(l.shape.str() << "; " << std::string(l.keys));
    const auto mesh = train_on_thread_mesh(gpt_recipe(text, "mesh", "\"cpu:0\"", 8 / l.shape.data, mesh_keys(l.shape, l.keys)),
                                           (tmp / "distrain_gpt_mesh").string(), l.shape);
    check_close(single.weights, mesh.weights);
    CHECK(mesh.loss == doctest::Approx(single.loss).epsilon(1e-5));
  }
}

// A GPU rank's exchanges go through host copies (Mesh::staged); on CPU devices, with every
// tensor staged, the same layouts must train bitwise as with the host communicators alone.
TEST_CASE("gpt: the mesh with every exchange through a host copy (a GPU rank's path) trains bitwise as without") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  for (const auto& [shape, keys] : kEveryAxisLayouts) {
    INFO(shape.str() << "; " << std::string(keys));
    const std::string recipe = gpt_recipe(text, "mesh", "\"cpu:0\"", 8 / shape.data, mesh_keys(shape, keys));
    const auto plain = train_on_thread_mesh(recipe, (tmp / "distrain_gpt_mesh").string(), shape);
    const auto staged = train_on_thread_mesh(recipe, (tmp / "distrain_gpt_mesh").string(), shape, true);
    CHECK(staged.weights == plain.weights);
    CHECK(staged.loss == plain.loss);
  }
}

// Under bf16 the mesh's shard_optimizer keeps float32 masters of each data rank's shard (in
// host memory with offload_optimizer) beside bf16 whole values, as zero stage 1 does: it
// keeps to one_device in bf16, and offloaded masters update bitwise as on the device. The
// checkpoint (read from the masters, gathered over the tensor axis) holds the weights
// compared. micro_batches = 2: accumulated on the one model, or (pipeline 2) two
// micro-batches in flight on copies that unpack the same bf16 values.
TEST_CASE("gpt: the mesh's shard_optimizer under bf16 keeps float32 masters: near one_device, offload bitwise") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  const std::string bf16 = "steps = 5\nvalidate = false\nprecision = \"bf16\"";
  const auto single = train_from_text(gpt_recipe(text, "one_device", "\"cpu:0\"", 8, "", 0.0, bf16),
                                      (tmp / "distrain_gpt_mesh_bf16_one").string());
  for (const MeshShape shape : {MeshShape{2, 1, 1}, MeshShape{2, 2, 1}, MeshShape{2, 1, 2}}) {
    INFO(shape.str());
    const std::string keys = mesh_keys(shape, "micro_batches = 2\nshard_optimizer = true");
    const auto mesh = [&](const std::string& more) {
      return train_on_thread_mesh(gpt_recipe(text, "mesh", "\"cpu:0\"", 8 / shape.data, keys + more, 0.0, bf16),
                                  (tmp / "distrain_gpt_mesh_bf16").string(), shape);
    };
    const auto device = mesh(""), host = mesh("\noffload_optimizer = true");
    // The gradients are summed in another order than one_device's (over data ranks, and with
    // tensor 2 over heads too): an ulp there can carry a bf16 rounding of a probability or
    // score gradient (attention's operands) or of a product to the next bf16 step (tests/dist
    // takes 1e-3 with tensor 2 too).
    check_close(single.weights, device.weights, shape.tensor > 1 ? 1e-3 : 1e-4);
    CHECK(device.loss == doctest::Approx(single.loss).epsilon(1e-3));
    CHECK(device.weights == host.weights);
  }
}

// What check predicts per mesh rank under shard_optimizer (from models of each rank's part,
// built without storage) is what the built strategy holds, byte for byte: float32 whole
// values, or bf16 ones beside float32 masters on the device or in host memory.
TEST_CASE("gpt: check's bytes per mesh rank under shard_optimizer are the built strategy's") {
  const std::string text = random_text_file("distrain_gpt_eq.txt", 4000, 17);
  for (const MeshShape shape : {MeshShape{2, 2, 1}, MeshShape{2, 1, 2}})
  for (const char* precision : {"float32", "bf16"})
    for (const char* offload : {"false", "true"}) {
      INFO(shape.str() << ", " << precision << ", offload " << offload);
      const std::string keys = fmt::format("data = 2\ntensor = {}\npipeline = {}\nmicro_batches = 2\nshard_optimizer = true\n"
                                           "offload_optimizer = {}", shape.tensor, shape.pipeline, offload);
      const std::string train = fmt::format("steps = 5\nprecision = \"{}\"", precision);
      const Recipe recipe = parse_recipe(gpt_recipe(text, "mesh", "\"cpu:0\"", 4, keys, 0.0, train), "m.toml");
      const std::vector<RankBytes> predicted = mesh_rank_bytes(recipe);
      const std::vector<Mesh> meshes = Mesh::over_threads(shape);
      std::vector<MemoryUse> built(static_cast<size_t>(shape.size()));
      ReplicaThreads ranks(shape.size(), 1, [&](const std::string& why) { meshes[0].abort(why); });
      ranks.run([&](int r) {
        built[static_cast<size_t>(r)] = make_strategy(recipe, false, &meshes[static_cast<size_t>(r)])->memory_per_replica(4);
      });
      for (size_t r = 0; r < built.size(); ++r) {
        CHECK(predicted[r].parameters == built[r].parameters);
        CHECK(predicted[r].gradients == built[r].gradients);
        CHECK(predicted[r].optimizer == built[r].optimizer);
        CHECK(predicted[r].offloaded == built[r].offloaded);
      }
    }
}

}  // namespace distrain::test

namespace distrain::test {

// The Llama model (grouped-query attention with rotary positions, RMS norms, SwiGLU, an
// untied head) under every strategy and mesh layout against one_device on the same global
// batch of 8, after 5 steps: within 1e-5 of the largest weight.
TEST_CASE("llama: mirrored, zero 1-3 (+ offload), central_storage and the mesh's layouts match one_device") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_llama_eq.txt", 4000, 19);
  const auto single = train_from_text(llama_recipe(text, "one_device", "\"cpu:0\"", 8), (tmp / "distrain_llama_one").string());
  CHECK(std::isfinite(single.loss));
  const Run runs[] = {Run{"mirrored", ""},          Run{"central_storage", ""}, Run{"zero", "stage = 1"},
                      Run{"zero", "stage = 2"},     Run{"zero", "stage = 3"},
                      Run{"zero", "stage = 3\noffload_optimizer = true"}};
  for (const Run& run : runs) {
    INFO(run.strategy << " " << run.extra);
    const auto other =
        train_from_text(llama_recipe(text, run.strategy, cpu_devices(2), 4, run.extra), (tmp / "distrain_llama_other").string());
    check_close(single.weights, other.weights);
    CHECK(other.loss == doctest::Approx(single.loss).epsilon(1e-5));
  }
  const MeshLayout layouts[] = {
      {{1, 2, 1}, ""},
      {{1, 2, 1}, "sequence_parallel = true"},
      {{1, 1, 2}, "micro_batches = 4"},
      {{2, 2, 2}, "micro_batches = 2\nshard_optimizer = true\nsequence_parallel = true"},
  };
  for (const MeshLayout& l : layouts) {
    INFO(l.shape.str() << "; " << std::string(l.keys));
    const auto mesh = train_on_thread_mesh(
        llama_recipe(text, "mesh", "\"cpu:0\"", 8 / l.shape.data, mesh_keys(l.shape, l.keys)),
        (tmp / "distrain_llama_mesh").string(), l.shape);
    check_close(single.weights, mesh.weights);
    CHECK(mesh.loss == doctest::Approx(single.loss).epsilon(1e-5));
  }
}

// Tensor 4 splits 4 key/value heads one a rank; with 2 it is a one-line error naming both.
TEST_CASE("llama: tensor 4 splits query and key/value heads together, and a degree that does not divide kv_heads is refused") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_llama_eq.txt", 4000, 19);
  const std::string plain = "steps = 5\nvalidate = false";
  const auto single =
      train_from_text(llama_recipe(text, "one_device", "\"cpu:0\"", 8, "", plain, 4), (tmp / "distrain_llama_one4").string());
  const MeshShape four{1, 4, 1};
  const auto mesh = train_on_thread_mesh(llama_recipe(text, "mesh", "\"cpu:0\"", 8, mesh_keys(four, ""), plain, 4),
                                         (tmp / "distrain_llama_mesh4").string(), four);
  check_close(single.weights, mesh.weights);
  CHECK_THROWS_WITH_AS(train_on_thread_mesh(llama_recipe(text, "mesh", "\"cpu:0\"", 8, mesh_keys(four, ""), plain, 2),
                                            (tmp / "distrain_llama_mesh4").string(), four),
                       doctest::Contains("kv_heads = 2 do not split over a tensor degree of 4"), UserError);
}

// Recompute and bf16 on the Llama blocks: recompute bitwise as none; bf16 under zero 2
// near one_device bf16.
TEST_CASE("llama: recompute = blocks trains bitwise as none, and bf16 under mirrored stays near one_device bf16") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string text = random_text_file("distrain_llama_eq.txt", 4000, 19);
  const std::string plain = "steps = 5\nvalidate = false";
  const auto none = train_from_text(llama_recipe(text, "mirrored", cpu_devices(2), 4, "", plain),
                                    (tmp / "distrain_llama_none").string());
  const auto blocks = train_from_text(llama_recipe(text, "mirrored", cpu_devices(2), 4, "", plain + "\nrecompute = \"blocks\""),
                                      (tmp / "distrain_llama_blocks").string());
  CHECK(none.weights == blocks.weights);
  const std::string bf16 = plain + "\nprecision = \"bf16\"";
  const auto one = train_from_text(llama_recipe(text, "one_device", "\"cpu:0\"", 8, "", bf16), (tmp / "distrain_llama_bf1").string());
  const auto two = train_from_text(llama_recipe(text, "mirrored", cpu_devices(2), 4, "", bf16), (tmp / "distrain_llama_bf2").string());
  check_close(one.weights, two.weights, 1e-3);
  CHECK(two.loss == doctest::Approx(none.loss).epsilon(0.02));
}

}  // namespace distrain::test
