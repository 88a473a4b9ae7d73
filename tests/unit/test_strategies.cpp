// Collectives of the local communicator (exact sums, as nccl-tests' verifiable), and the
// central invariant: K steps of a synchronous strategy with R replicas x b examples give
// the weights of one_device with batch R*b on the same data.
#include <filesystem>
#include <thread>

#include "core/comm/hierarchical_communicator.hpp"
#include "core/comm/local_communicator.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/strategy/shard_layout.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/trainer.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

// Runs fn(comm) on `ranks` threads sharing one local group.
void on_ranks(int ranks, const std::function<void(LocalCommunicator&)>& fn) {
  auto group = std::make_shared<LocalGroup>(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      LocalCommunicator comm(group, r);
      fn(comm);
    });
  for (auto& t : threads) t.join();
}

Tensor host(std::vector<float>& v) { return Tensor{v.data(), Shape{static_cast<int64_t>(v.size())}, DType::f32, Device{}}; }

}  // namespace

TEST_CASE("local communicator: all_reduce, reduce_scatter, all_gather, broadcast are exact for 1..4 ranks") {
  for (int n = 1; n <= 4; ++n) {
    on_ranks(n, [n](LocalCommunicator& c) {
      const int r = c.rank();
      // Integers well inside float's exact range: sums are exact whatever the order.
      std::vector<float> v(37);
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((r + 1) * 1000 + static_cast<int>(i));
      c.all_reduce(host(v), ReduceOp::sum);
      for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == static_cast<float>(1000 * n * (n + 1) / 2 + n * static_cast<int>(i)));

      std::vector<float> m{static_cast<float>(r), static_cast<float>(-r)};
      c.all_reduce(host(m), ReduceOp::max);
      CHECK(m == std::vector<float>{static_cast<float>(n - 1), 0.0f});

      std::vector<float> in(static_cast<size_t>(3 * n)), out(3);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i * (r + 1));
      c.reduce_scatter(host(in), host(out), ReduceOp::sum);
      for (int i = 0; i < 3; ++i) CHECK(out[static_cast<size_t>(i)] == static_cast<float>((3 * r + i) * n * (n + 1) / 2));

      std::vector<float> mine{static_cast<float>(r), static_cast<float>(10 * r)}, all(static_cast<size_t>(2 * n));
      c.all_gather(host(mine), host(all));
      for (int k = 0; k < n; ++k) {
        CHECK(all[static_cast<size_t>(2 * k)] == static_cast<float>(k));
        CHECK(all[static_cast<size_t>(2 * k + 1)] == static_cast<float>(10 * k));
      }

      std::vector<float> b{static_cast<float>(r + 5)};
      c.broadcast(host(b), n - 1);
      CHECK(b[0] == static_cast<float>(n + 4));
      c.barrier();

      // What each rank sent, by the ring's share (n-1)/n: all_reduce twice the tensor,
      // reduce_scatter its input, all_gather its output, broadcast the tensor.
      const double share = static_cast<double>(n - 1) / n;
      const double floats = 2 * (37 + 2) + 3 * n + 2 * n + 1;
      CHECK(c.traffic().collectives == 5);
      CHECK(c.traffic().bytes == doctest::Approx(4 * floats * share));
    });
  }
}

TEST_CASE("hierarchical communicator in one process: the group's ranks, exact all_reduce, reduce_scatter, all_gather, broadcast") {
  for (int n = 1; n <= 4; ++n) {
    on_ranks(n, [n](LocalCommunicator& c) {
      HierarchicalCommunicator h(CommLevels{&c}, HostStaging{});
      CHECK(h.rank() == c.rank());
      CHECK(h.size() == n);
      const int r = h.rank();
      std::vector<float> v{static_cast<float>(r + 1), static_cast<float>(10 * r)};
      h.all_reduce(host(v), ReduceOp::sum);
      CHECK(v == std::vector<float>{static_cast<float>(n * (n + 1) / 2), static_cast<float>(5 * n * (n - 1))});
      std::vector<float> mine{static_cast<float>(r)}, all(static_cast<size_t>(n));
      h.all_gather(host(mine), host(all));
      for (int k = 0; k < n; ++k) CHECK(all[static_cast<size_t>(k)] == static_cast<float>(k));
      std::vector<float> b{static_cast<float>(r + 5)};
      h.broadcast(host(b), n - 1);
      CHECK(b[0] == static_cast<float>(n + 4));
      std::vector<float> in(static_cast<size_t>(2 * n)), out(2);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i * (r + 1));
      h.reduce_scatter(host(in), host(out), ReduceOp::sum);
      for (int i = 0; i < 2; ++i) CHECK(out[static_cast<size_t>(i)] == static_cast<float>((2 * r + i) * n * (n + 1) / 2));
      h.barrier();
      CHECK(h.traffic().collectives == 4);  // its own count; the group's calls count there
    });
  }
}

TEST_CASE("local communicator: a failed rank wakes the others instead of leaving them waiting") {
  auto group = std::make_shared<LocalGroup>(2);
  std::thread waiter([&] {
    LocalCommunicator c(group, 0);
    std::vector<float> v{1};
    CHECK_THROWS_WITH(c.all_reduce(host(v), ReduceOp::sum), doctest::Contains("replica 1 failed"));
  });
  group->abort("replica 1 failed");
  waiter.join();
}

namespace {

std::string recipe_text(const std::string& strategy, const std::string& devices, int per_replica,
                        const std::string& extra_layer = "", const std::string& extra_strategy = "") {
  return fmt::format(R"(
name = "equivalence"
seed = 9
[data]
dataset = "synthetic"
train_examples = 320
test_examples = 32
image_shape = [10, 10, 1]
shuffle = false
[model]
input_shape = [10, 10, 1]
layers = [
  {{ type = "rescaling", scale = 0.00392156862745098 }},
  {{ type = "conv2d", filters = 6, kernel_size = 3, activation = "relu" }},{}
  {{ type = "max_pool2d" }},
  {{ type = "flatten" }},
  {{ type = "dense", units = 16, activation = "relu" }},
  {{ type = "dense", units = 10 }},
]
[optimizer]
type = "sgd"
learning_rate = 0.05
momentum = 0.9
[optimizer.schedule]
base_batch = 16
[strategy]
name = "{}"
devices = [{}]
per_replica_batch = {}
check_every = 1
{}
[train]
steps = 6
validate = false
)",
                     extra_layer, strategy, devices, per_replica, extra_strategy);
}

}  // namespace

TEST_CASE("mirrored, central_storage and zero with R replicas x b match one_device with R*b (R = 1, 2, 4)") {
  const fs::path tmp = fs::temp_directory_path();
  for (int r : {1, 2, 4}) {
    INFO("replicas " << r);
    std::string devices;
    for (int i = 0; i < r; ++i) devices += fmt::format("{}\"cpu:{}\"", i ? ", " : "", i);
    const auto single = train_from_text(recipe_text("one_device", "\"cpu:0\"", 16 * r), (tmp / "distrain_eq_one").string()).weights;
    const auto mirrored = train_from_text(recipe_text("mirrored", devices, 16), (tmp / "distrain_eq_mirrored").string()).weights;
    check_close(single, mirrored);
    const auto central = train_from_text(recipe_text("central_storage", devices, 16), (tmp / "distrain_eq_central").string()).weights;
    check_close(single, central);
    const auto zero = train_from_text(recipe_text("zero", devices, 16), (tmp / "distrain_eq_zero").string()).weights;
    check_close(single, zero);
    const auto zero2 = train_from_text(recipe_text("zero", devices, 16, "", "stage = 2"), (tmp / "distrain_eq_zero2").string()).weights;
    check_close(single, zero2);
    const auto zero3 = train_from_text(recipe_text("zero", devices, 16, "", "stage = 3"), (tmp / "distrain_eq_zero3").string()).weights;
    check_close(single, zero3);
  }
}

TEST_CASE("shard layout: weight decay's ranges land on the same elements in every shard") {
  const std::vector<Range> layers{{0, 100}, {112, 112}, {112, 113}, {128, 1128}, {1136, 1140}};
  const std::vector<Range> decayed{{0, 64}, {96, 100}, {200, 700}, {1136, 1140}};
  auto is_decayed = [&](int64_t i) {
    for (const Range& r : decayed)
      if (i >= r.begin && i < r.end) return true;
    return false;
  };
  for (int n : {1, 2, 3, 4, 7}) {
    INFO("replicas " << n);
    const ShardLayout layout(layers, n);
    for (int g = 0; g < n; ++g) {
      std::vector<bool> in_shard(static_cast<size_t>(layout.size()), false);
      int64_t last_end = -1;
      for (const Range& r : layout.in_shard(decayed, g)) {
        CHECK(r.begin > last_end);  // in order, merged
        last_end = r.end;
        for (int64_t i = r.begin; i < r.end; ++i) in_shard[static_cast<size_t>(i)] = true;
      }
      for (const ShardLayout::Piece& p : layout.owned({0, 1140}, g))
        for (int64_t i = 0; i < p.arena.size(); ++i)
          CHECK(in_shard[static_cast<size_t>(p.shard_offset + i)] == is_decayed(p.arena.begin + i));
    }
  }
}

TEST_CASE("shard layout: every element of every layer has one owner, at one place in its shard") {
  // Layers as a model lays them out: aligned starts, gaps, a layer without variables.
  const std::vector<Range> layers{{0, 100}, {112, 112}, {112, 113}, {128, 1128}, {1136, 1140}};
  for (int n : {1, 2, 3, 4, 7}) {
    INFO("replicas " << n);
    const ShardLayout layout(layers, n);
    std::vector<int> owners(1140, 0);
    std::vector<std::vector<int>> used(static_cast<size_t>(n), std::vector<int>(static_cast<size_t>(layout.size()), 0));
    for (int g = 0; g < n; ++g)
      for (const ShardLayout::Piece& p : layout.owned({0, 1140}, g)) {
        CHECK(p.shard_offset % 16 == 0);
        for (int64_t i = 0; i < p.arena.size(); ++i) {
          ++owners[static_cast<size_t>(p.arena.begin + i)];
          ++used[static_cast<size_t>(g)][static_cast<size_t>(p.shard_offset + i)];
        }
      }
    for (const Range& r : layers)
      for (int64_t i = r.begin; i < r.end; ++i) CHECK(owners[static_cast<size_t>(i)] == 1);
    for (const auto& u : used)
      for (int c : u) CHECK(c <= 1);
    // Each chunk is at most a 16-float block more than an even share.
    for (size_t l = 0; l < layers.size(); ++l) CHECK(layout.chunk(l) * n < layers[l].size() + 16 * n);
    // A range inside one layer maps to the pieces of that layer only.
    const auto inner = layout.owned({130, 140}, 0);
    CHECK(inner.size() == 1);
    CHECK(inner[0].arena.size() == 10);
    CHECK(inner[0].shard_offset == layout.offset(3) + 2);
  }
}

TEST_CASE("zero stages 2 and 3: replicas left without examples by the last batch still take part, memory") {
  // 322 examples, global batch 64: the sixth batch has 2 examples for 4 replicas.
  auto text = [](const std::string& strategy, const std::string& devices, int per_replica, const std::string& extra) {
    std::string t = recipe_text(strategy, devices, per_replica, "", extra);
    t.replace(t.find("train_examples = 320"), 20, "train_examples = 322");
    t.replace(t.find("steps = 6"), 9, "steps = 7");
    return t;
  };
  const fs::path tmp = fs::temp_directory_path();
  const auto single = train_from_text(text("one_device", "\"cpu:0\"", 64, ""), (tmp / "distrain_z2_one").string()).weights;
  for (const char* stage : {"stage = 2", "stage = 3"}) {
    INFO(stage);
    const auto sharded = train_from_text(text("zero", "\"cpu:0\", \"cpu:1\", \"cpu:2\", \"cpu:3\"", 16, stage),
                                        (tmp / "distrain_z2_four").string()).weights;
    check_close(single, sharded);
  }

  const std::string four = "\"cpu:0\", \"cpu:1\", \"cpu:2\", \"cpu:3\"";
  auto z2 = make_strategy(parse_recipe(text("zero", four, 16, "stage = 2"), "z.toml"));
  auto z3 = make_strategy(parse_recipe(text("zero", four, 16, "stage = 3"), "z.toml"));
  const Model& m = z2->model();
  // The layout of core/strategy/shard_layout.hpp: each layer in 4 chunks of 16-float blocks.
  int64_t shard = 0, chunk_max = 0;
  for (const Range& r : m.trainable_ranges()) {
    const int64_t chunk = ((r.size() + 3) / 4 + 15) / 16 * 16;
    shard += chunk;
    chunk_max = std::max(chunk_max, chunk);
  }
  const int64_t bucket = 4 * chunk_max, arena = m.params().trainable_arena_size();
  CHECK(shard * 4 <= arena + 4 * 16 * static_cast<int64_t>(m.layers().size()));
  // The shard, one layer's bucket and its reduced chunk (added to the shard): no gradient
  // arena (2), no parameter arena (3).
  CHECK(z2->memory_per_replica(16).gradients == (shard + bucket + chunk_max) * 4);
  CHECK(m.params().grads().numel() == 0);
  // Stage 2's parameters are whole (with room past the end for the last layer's padding
  // chunks, which all-gather straight into them) plus the shard.
  CHECK(z2->memory_per_replica(16).parameters == (arena + 16 * 4 + shard) * 4);
  CHECK(z3->memory_per_replica(16).gradients == (shard + bucket + chunk_max) * 4);
  CHECK(z3->memory_per_replica(16).parameters == (shard + bucket) * 4);
  CHECK(z3->model().params().values().numel() == 0);
}

TEST_CASE("zero stage 1: per-replica optimizer bytes are total / N plus padding, checkpoints move between sharding") {
  const std::string adam = "\n[optimizer]\ntype = \"adam\"";
  auto adam_recipe = [&](const std::string& strategy, const std::string& devices, const std::string& extra = "") {
    std::string t = recipe_text(strategy, devices, 16, "", extra);
    const size_t a = t.find("[optimizer]"), b = t.find("[optimizer.schedule]");
    return t.replace(a, b - a, "[optimizer]\ntype = \"adam\"\n");
  };
  auto one = make_strategy(parse_recipe(adam_recipe("one_device", "\"cpu:0\""), "one.toml"));
  const MemoryUse full = one->memory_per_replica(16);
  const int64_t arena = one->model().params().values().numel();
  CHECK(full.optimizer == 2 * arena * 4);  // m and v
  for (int n : {2, 3, 4}) {
    std::string devices;
    for (int i = 0; i < n; ++i) devices += fmt::format("{}\"cpu:{}\"", i ? ", " : "", i);
    auto z = make_strategy(parse_recipe(adam_recipe("zero", devices), "zero.toml"));
    const MemoryUse sharded = z->memory_per_replica(16);
    INFO("replicas " << n << ": " << sharded.optimizer << " bytes vs " << full.optimizer << " / " << n);
    // Each layer's chunk is rounded up to 16 floats, for 2 slots; the parameters are whole
    // (with 16 floats per replica of room past the end) plus the shard.
    const int64_t layers = static_cast<int64_t>(z->model().layers().size());
    CHECK(sharded.optimizer >= full.optimizer / n);
    CHECK(sharded.optimizer <= full.optimizer / n + 2 * layers * ParamArena::kAlign * 4);
    CHECK(sharded.parameters == full.parameters + n * ParamArena::kAlign * 4 + sharded.optimizer / 2);
  }

  // Saved under zero x4, continued under zero x2 and under one_device: all end where
  // one_device alone ends.
  const fs::path tmp = fs::temp_directory_path();
  auto run = [&](const std::string& strategy, const std::string& devices, int per_replica, int steps, const fs::path& dir,
                 const std::string& extra = "") {
    std::string t = adam_recipe(strategy, devices, extra);
    t.replace(t.find("per_replica_batch = 16"), 22, fmt::format("per_replica_batch = {}", per_replica));
    t.replace(t.find("steps = 6"), 9, fmt::format("steps = {}", steps));
    TrainOptions o;
    o.run_dir = dir.string();
    o.out = std::fopen("/dev/null", "w");
    return train(parse_recipe(t, "move.toml"), o).last_checkpoint;
  };
  for (const char* d : {"distrain_move_ref", "distrain_move_a", "distrain_move_b", "distrain_move_c", "distrain_move_d"})
    fs::remove_all(tmp / d);
  const std::string ref = run("one_device", "\"cpu:0\"", 64, 10, tmp / "distrain_move_ref");
  run("zero", "\"cpu:0\", \"cpu:1\", \"cpu:2\", \"cpu:3\"", 16, 5, tmp / "distrain_move_a");
  const std::string a = run("zero", "\"cpu:0\", \"cpu:1\"", 32, 10, tmp / "distrain_move_a");
  run("zero", "\"cpu:0\", \"cpu:1\", \"cpu:2\", \"cpu:3\"", 16, 5, tmp / "distrain_move_b");
  const std::string b = run("one_device", "\"cpu:0\"", 64, 10, tmp / "distrain_move_b");
  Recipe single = parse_recipe(adam_recipe("one_device", "\"cpu:0\""), "x.toml");
  auto load = [&](const std::string& ckpt) {
    auto s = make_strategy(single);
    load_weights(ckpt, s->model());
    return to_host(s->model().params().values());
  };
  check_close(load(ref), load(a));
  check_close(load(ref), load(b));
  // Saved under ZeRO-3 with 4 replicas (parameters sharded too), continued under ZeRO-1
  // with 2 and under mirrored with 2.
  const std::string four = "\"cpu:0\", \"cpu:1\", \"cpu:2\", \"cpu:3\"";
  run("zero", four, 16, 5, tmp / "distrain_move_c", "stage = 3");
  const std::string c = run("zero", "\"cpu:0\", \"cpu:1\"", 32, 10, tmp / "distrain_move_c");
  run("zero", four, 16, 5, tmp / "distrain_move_d", "stage = 3");
  const std::string d = run("mirrored", "\"cpu:0\", \"cpu:1\"", 32, 10, tmp / "distrain_move_d");
  check_close(load(ref), load(c));
  check_close(load(ref), load(d));
  std::string stage4 = adam_recipe("zero", "\"cpu:0\", \"cpu:1\"");
  stage4.replace(stage4.find("check_every = 1"), 15, "check_every = 1\nstage = 4");
  CHECK_THROWS_WITH_AS(parse_recipe(stage4, "z.toml"), doctest::Contains("strategy.stage: must be 1, 2 or 3"), UserError);
}

TEST_CASE("sync_batch_norm: mirrored and central_storage with batch norm match one_device (R = 2, 4)") {
  const fs::path tmp = fs::temp_directory_path();
  const std::string bn = "\n  { type = \"batch_norm\", momentum = 0.5 },";
  for (int r : {2, 4}) {
    INFO("replicas " << r);
    std::string devices;
    for (int i = 0; i < r; ++i) devices += fmt::format("{}\"cpu:{}\"", i ? ", " : "", i);
    const auto single = train_from_text(recipe_text("one_device", "\"cpu:0\"", 16 * r, bn), (tmp / "distrain_bn_one").string()).weights;
    const auto synced = train_from_text(recipe_text("mirrored", devices, 16, bn, "sync_batch_norm = true"),
                                       (tmp / "distrain_bn_mirrored").string()).weights;
    check_close(single, synced);
    const auto central = train_from_text(recipe_text("central_storage", devices, 16, bn, "sync_batch_norm = true"),
                                        (tmp / "distrain_bn_central").string()).weights;
    check_close(single, central);
    // Per-replica statistics (the default) are a different computation: they must differ.
    const auto local = train_from_text(recipe_text("mirrored", devices, 16, bn), (tmp / "distrain_bn_local").string()).weights;
    double diff = 0;
    for (size_t i = 0; i < single.size(); ++i) diff = std::max(diff, static_cast<double>(std::abs(single[i] - local[i])));
    CHECK(diff > 1e-4);
  }
}

TEST_CASE("strategy options are checked") {
  CHECK_THROWS_WITH_AS(parse_recipe(recipe_text("mirrored", "\"cpu:0\", \"cpu:0\"", 8), "x.toml"),
                       doctest::Contains("cpu:0 is listed twice"), UserError);
  CHECK_THROWS_WITH_AS(parse_recipe(recipe_text("one_device", "\"cpu:0\", \"cpu:1\"", 8), "x.toml"),
                       doctest::Contains("one_device takes exactly one device"), UserError);
  auto with = [](const std::string& strategy, const std::string& line) {
    std::string t = recipe_text(strategy, "\"cpu:0\", \"cpu:1\"", 8);
    return t.replace(t.find("check_every = 1"), 15, "check_every = 1\n" + line);
  };
  CHECK_THROWS_WITH_AS(parse_recipe(with("mirrored", "cross_device_ops = \"nccl\""), "x.toml"),
                       doctest::Contains("nccl needs cuda devices"), UserError);
  CHECK(parse_recipe(with("mirrored", "communication = \"ring\""), "x.toml").notices.size() == 1);
  CHECK(parse_recipe(with("mirrored", "sync_batch_norm = true"), "x.toml").strategy.sync_batch_norm);
  CHECK_THROWS_WITH_AS(parse_recipe(with("mirrored", "sync_batch_norm = 1"), "x.toml"),
                       doctest::Contains("strategy.sync_batch_norm: expected true or false"), UserError);
  CHECK(parse_recipe(with("mirrored", "cross_device_ops = \"reduce_to_one_device\""), "x.toml").strategy.mirrored.cross_device_ops ==
        "reduce_to_one_device");
}

// Each key one strategy reads, left in a recipe run under another strategy (a recipe
// written for one, run with --set strategy.name=...), is dropped: one notice names it and
// its readers, and the table (which checkpoints store) no longer holds it.
TEST_CASE("strategy keys of one strategy are dropped under another, with a notice naming them") {
  const std::pair<const char*, const char*> keys[] = {
      {"communication = \"ring\"", "multi_worker_mirrored"}, {"data = 2", "mesh"}, {"tensor = 2", "mesh"},
      {"pipeline = 2", "mesh"}, {"micro_batches = 2", "mesh"}, {"schedule = \"gpipe\"", "mesh"},
      {"stage_boundaries = [\"d\"]", "mesh"}, {"shard_optimizer = true", "mesh"}, {"sequence_parallel = true", "mesh"},
      {"vocab_parallel = true", "mesh"}, {"offload_optimizer = true", "zero, mesh"}, {"stage = 2", "zero"},
      {"num_ps = 2", "parameter_server"}, {"staleness = 1", "parameter_server"}};
  for (const auto& [line, reader] : keys) {
    INFO(line);
    std::string t = recipe_text("mirrored", "\"cpu:0\", \"cpu:1\"", 8);
    t.replace(t.find("check_every = 1"), 15, fmt::format("check_every = 1\n{}", line));
    const std::string key = std::string(line).substr(0, std::string(line).find(' '));
    const Recipe r = parse_recipe(t, "x.toml");
    REQUIRE(r.notices.size() == 1);
    CHECK(r.notices[0] == fmt::format("x.toml: strategy \"mirrored\" does not read strategy.{} ({} only): ignored", key, reader));
    CHECK_FALSE((*r.table)["strategy"].as_table()->contains(key));
    CHECK(parse_recipe(r.resolved_text(), "stored.toml").notices.empty());
  }
  // Several at once: one notice; the keys of the strategy in use are kept and read.
  std::string t = recipe_text("zero", "\"cpu:0\", \"cpu:1\"", 8);
  t.replace(t.find("check_every = 1"), 15, "check_every = 1\ncross_device_ops = \"auto\"\ndata = 2\nstage = 2");
  const Recipe r = parse_recipe(t, "x.toml");
  REQUIRE(r.notices.size() == 1);
  CHECK(r.notices[0] ==
        "x.toml: strategy \"zero\" does not read strategy.cross_device_ops (mirrored only), strategy.data (mesh only): ignored");
  CHECK(r.strategy.zero.stage == 2);
  // A key the strategy in use reads is still checked.
  std::string bad = recipe_text("zero", "\"cpu:0\", \"cpu:1\"", 8);
  bad.replace(bad.find("check_every = 1"), 15, "check_every = 1\nstage = 4");
  CHECK_THROWS_WITH_AS(parse_recipe(bad, "x.toml"), doctest::Contains("strategy.stage: must be 1, 2 or 3"), UserError);
  CHECK(parse_recipe(recipe_text("mirrored", "\"cpu:0\", \"cpu:1\"", 8), "x.toml").notices.empty());
}

// The dataset kept on the devices and gathered there from indices trains exactly as
// batches built on the host do (shuffled, with a partial last batch: 320 = 3 x 96 + 32),
// and validates alike (one_device and mirrored keep the test split there too; 32 = 12 + 12 + 8).
TEST_CASE("data.placement = device gives the weights and validation of host bitwise: one_device, mirrored and zero") {
  const fs::path tmp = fs::temp_directory_path();
  struct Run {
    const char* strategy;
    const char* devices;
    int per_replica;
  };
  for (const Run& run : {Run{"one_device", "\"cpu:0\"", 48}, Run{"mirrored", "\"cpu:0\", \"cpu:1\"", 48},
                         Run{"zero", "\"cpu:0\", \"cpu:1\"", 48}}) {
    INFO(run.strategy);
    std::string text = recipe_text(run.strategy, run.devices, run.per_replica);
    text.replace(text.find("shuffle = false"), 15, "shuffle = true");
    text.replace(text.find("validate = false"), 16, "validate = true\neval_batch = 12");
    auto placed = [&](const char* where) {
      std::string t = text;
      t.replace(t.find("[data]\n"), 7, fmt::format("[data]\nplacement = \"{}\"\n", where));
      return train_from_text(t, (tmp / fmt::format("distrain_placement_{}", where)).string());
    };
    const Trained on_host = placed("host"), on_device = placed("device");
    CHECK(on_host.weights == on_device.weights);
    CHECK(on_host.val_loss > 0);
    CHECK(on_host.val_loss == on_device.val_loss);
    CHECK(on_host.val_accuracy == on_device.val_accuracy);
  }
}

}  // namespace distrain::test
