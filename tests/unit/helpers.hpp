// Shared test helpers: build a single layer from TOML text, move tensors to and from
// the host, deterministic random fills.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <toml++/toml.h>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/base/json.hpp"
#include "core/base/rng.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/layers/registry.hpp"
#include "core/model/gradient_reducer.hpp"
#include "core/model/param_gatherer.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/trainer.hpp"

namespace distrain::test {

inline Backend& cpu() { return backend_for(Device{DeviceType::cpu, 0}); }

inline std::unique_ptr<Layer> make_layer(const std::string& toml_text) {
  static std::vector<toml::table> keep;  // ConfigTable reads the table during construction only
  keep.push_back(toml::parse(toml_text));
  ConfigTable config(keep.back(), "test", "");
  auto layer = create_layer(config);
  layer->set_name("layer");
  return layer;
}

// A layer tested alone: allocates its arena and gives it the storage a Model gives by
// default (FullValues, FullGradients); keep the result alive as long as the arena.
struct ArenaStorage {
  FullValues values;
  FullGradients grads;
};
inline std::unique_ptr<ArenaStorage> allocate_arena(ParamArena& arena, Backend& be) {
  arena.allocate(be);
  auto s = std::make_unique<ArenaStorage>();
  s->values.attach(arena, {});
  s->grads.attach(arena, {});
  return s;
}

// A tensor's values wherever it lives (a GPU's through its backend).
inline std::vector<float> to_host(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  backend_for(t.device).download(t, v.data());
  return v;
}

inline void from_host(const std::vector<float>& v, Tensor t) {
  REQUIRE(static_cast<int64_t>(v.size()) == t.numel());
  cpu().upload(v.data(), t);
}

inline std::vector<float> random_vector(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

// max |a - b| <= tol * max |a|: close at the scale of the whole tensor.
inline void check_close(const std::vector<float>& a, const std::vector<float>& b, double tol = 1e-5) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
    scale = std::max(scale, static_cast<double>(std::abs(a[i])));
  }
  INFO("max |a - b| = " << diff << ", max |a| = " << scale);
  CHECK(diff <= tol * std::max(scale, 1e-30));
}

struct Trained {
  std::vector<float> weights;  // the last checkpoint's, read back on cpu:0
  double loss;                 // the last epoch's training loss
  double val_loss = 0, val_accuracy = 0;  // its validation, when the recipe validates
};

// Options of a run in `dir` that prints nothing.
inline TrainOptions quiet(const std::string& dir) {
  TrainOptions o;
  o.run_dir = dir;
  o.out = std::fopen("/dev/null", "w");
  return o;
}

// The trainable values of checkpoint `ckpt` of the recipe's model, read back on cpu:0.
inline std::vector<float> checkpoint_values(const Recipe& recipe, const std::string& ckpt) {
  Recipe single = recipe;
  single.strategy = StrategySpec{};
  auto strategy = make_strategy(single);
  load_weights(ckpt, strategy->model());
  return to_host(strategy->model().params().values());
}

// A run folder's metrics.jsonl, one object per epoch, without the timing fields.
inline std::vector<Json> untimed_metrics(const std::filesystem::path& file) {
  std::vector<Json> epochs;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    epochs.push_back(Json::parse(line));
    epochs.back().erase("images_per_sec");
    epochs.back().erase("seconds");
  }
  return epochs;
}

// Trains the recipe `text` afresh in `dir`, quietly.
inline Trained train_from_text(const std::string& text, const std::string& dir) {
  const Recipe recipe = parse_recipe(text, dir + ".toml");
  std::filesystem::remove_all(dir);
  const TrainSummary s = train(recipe, quiet(dir));
  return {checkpoint_values(recipe, s.last_checkpoint), s.loss, s.val_loss, s.val_accuracy};
}

}  // namespace distrain::test
