// The training loop end to end in-process: exact resume after a crash, checkpoint
// round trips and checkpoint errors, run-folder files.
#include <filesystem>
#include <fstream>
#include <regex>

#include "core/base/json.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/trainer.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

// Small synthetic job with batch norm and dropout, so resume must restore moving
// statistics, optimizer slots and the per-step dropout seeds.
const char* kRecipe = R"(
name = "resume"
seed = 5
[data]
dataset = "synthetic"
train_examples = 300
test_examples = 64
image_shape = [8, 8, 1]
[model]
input_shape = [8, 8, 1]
layers = [
  { type = "rescaling", scale = 0.00392156862745098 },
  { type = "conv2d", filters = 4, kernel_size = 3, padding = "same", use_bias = false },
  { type = "batch_norm" },
  { type = "relu" },
  { type = "max_pool2d" },
  { type = "flatten" },
  { type = "dense", units = 16, activation = "relu" },
  { type = "dropout", rate = 0.25 },
  { type = "dense", units = 10 },
]
[optimizer]
type = "adam"
[optimizer.schedule]
warmup_steps = 3
decay = "cosine"
[strategy]
per_replica_batch = 32
[train]
epochs = 3
[checkpoint]
every_steps = 4
keep = 2
)";

std::vector<float> final_weights(const Recipe& recipe, const std::string& ckpt) {
  auto s = make_strategy(recipe);
  load_weights(ckpt, s->model());
  std::vector<float> all = to_host(s->model().params().values());
  const auto st = to_host(s->model().params().state());
  all.insert(all.end(), st.begin(), st.end());
  return all;
}



}  // namespace

TEST_CASE("exact resume: a run crashed mid-epoch or at an epoch's end and resumed ends bitwise identical to an uninterrupted one") {
  const Recipe recipe = parse_recipe(kRecipe, "resume.toml");
  const fs::path a = fs::temp_directory_path() / "distrain_resume_a", b = fs::temp_directory_path() / "distrain_resume_b";
  fs::remove_all(a);
  fs::remove_all(b);
  const TrainSummary full = train(recipe, quiet(a));
  CHECK(full.steps == 30);  // 10 batches (the last partial) x 3 epochs

  TrainOptions crash = quiet(b);
  crash.crash_after_step = 14;  // after the checkpoint of step 12, inside epoch 2
  train(recipe, crash);
  CHECK(list_checkpoints(b).back() == (b / "ckpt-000012.h5").string());
  const TrainSummary resumed = train(recipe, quiet(b));
  CHECK(resumed.steps == 30);
  CHECK(final_weights(recipe, full.last_checkpoint) == final_weights(recipe, resumed.last_checkpoint));
  // Same per-epoch metrics, except the timing fields.
  CHECK(untimed_metrics(a / "metrics.jsonl").size() == 3);
  CHECK(untimed_metrics(a / "metrics.jsonl") == untimed_metrics(b / "metrics.jsonl"));

  // Crashed just after the checkpoint that ends epoch 2, before its metrics line: the
  // resumed run ends that epoch without a step and must still report it in full.
  const fs::path c = fs::temp_directory_path() / "distrain_resume_c";
  fs::remove_all(c);
  TrainOptions at_end = quiet(c);
  at_end.crash_after_step = 20;
  train(recipe, at_end);
  CHECK(list_checkpoints(c).back() == (c / "ckpt-000020.h5").string());
  train(recipe, quiet(c));
  CHECK(untimed_metrics(c / "metrics.jsonl") == untimed_metrics(a / "metrics.jsonl"));
  CHECK(list_checkpoints(a).size() == 2);  // keep = 2
}

TEST_CASE("checkpoint: layout, optimizer round trip, init_from, errors name the file") {
  Recipe recipe = parse_recipe(kRecipe, "ckpt.toml");
  const fs::path dir = fs::temp_directory_path() / "distrain_ckpt";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto s = make_strategy(recipe);
  s->model().params().initialize(3);
  s->optimizer().set_iterations(7);
  TrainState st{11, 1, 2, LossStats{3.5, 4, 5}, 1.25};
  const std::string path = (dir / checkpoint_name(11)).string();
  save_checkpoint(path, s->model_state(), s->optimizer_state(), st, recipe.resolved_text());
  for (const auto& e : fs::directory_iterator(dir)) CHECK_FALSE(is_partial_save(e.path().string()));

  const CheckpointHeader h = read_checkpoint_header(path);
  CHECK(h.state.step == 11);
  CHECK(h.state.batch_in_epoch == 2);
  CHECK(h.state.epoch_stats.loss_sum == 3.5);
  CHECK(parse_recipe(h.recipe, "stored").name == "resume");

  auto t = make_strategy(recipe);
  load_weights(path, t->model());
  load_optimizer(path, t->model().params(), t->optimizer_state());
  CHECK(to_host(t->model().params().values()) == to_host(s->model().params().values()));
  CHECK(t->optimizer().iterations() == 7);

  // A model of another shape: the first differing variable is named.
  Recipe other = parse_recipe(std::regex_replace(std::string(kRecipe), std::regex("units = 16"), "units = 17"), "other.toml");
  auto o = make_strategy(other);
  CHECK_THROWS_WITH_AS(load_weights(path, o->model()), doctest::Contains("/model/dense_1/kernel has shape (64, 16), the model expects (64, 17)"),
                       UserError);
  // Another optimizer type cannot take the slots.
  Recipe sgd = parse_recipe(std::string(kRecipe) + "", "sgd.toml");
  sgd.optimizer = default_optimizer_spec("sgd");
  sgd.optimizer.momentum = 0.9;
  auto g = make_strategy(sgd);
  CHECK_THROWS_WITH_AS(load_optimizer(path, g->model().params(), g->optimizer_state()), doctest::Contains("optimizer state is for 'adam'"),
                       UserError);

  // Truncated, not HDF5, missing.
  const fs::path cut = dir / "cut.h5";
  fs::copy_file(path, cut);
  fs::resize_file(cut, fs::file_size(cut) / 2);
  CHECK_THROWS_AS(read_checkpoint_header(cut.string()), UserError);
  std::ofstream(dir / "text.h5") << "not a checkpoint";
  CHECK_THROWS_WITH_AS(read_checkpoint_header((dir / "text.h5").string()), doctest::Contains("not an HDF5 file"), UserError);
  CHECK_THROWS_WITH_AS(read_checkpoint_header((dir / "none.h5").string()), doctest::Contains("checkpoint not found"), UserError);
}

TEST_CASE("resume: a state no run of this data reaches, or a checkpoint of other data, is refused, and a finished run's "
          "rerun leaves its files as they were") {
  const Recipe recipe = parse_recipe(kRecipe, "resume.toml");
  const fs::path dir = fs::temp_directory_path() / "distrain_resume_checks";
  auto fresh_dir_with = [&](const Recipe& writer, const TrainState& st) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    auto s = make_strategy(writer);
    s->model_state().initialize(1);
    save_checkpoint((dir / checkpoint_name(st.step)).string(), s->model_state(), s->optimizer_state(), st,
                    writer.resolved_text());
  };
  // 300 examples: every epoch takes 1 to 300 steps.
  for (const TrainState& impossible : {TrainState{5, 1000001, 0, LossStats{}, 0.0},
                                       TrainState{int64_t{1} << 62, 1, 0, LossStats{}, 0.0}}) {
    fresh_dir_with(recipe, impossible);
    CHECK_THROWS_WITH_AS(train(recipe, quiet(dir.string())), doctest::Contains("cannot come from 300 training examples"),
                         UserError);
  }
  // The same layers on other data: a synthetic run's folder reused for Fashion-MNIST.
  const std::string mlp = "\n[model]\ninput_shape = [28, 28, 1]\nlayers = [{ type = \"flatten\" }, { type = \"dense\", units = 10 }]\n";
  const Recipe synthetic = parse_recipe("name = \"a\"\n[data]\ndataset = \"synthetic\"\nimage_shape = [28, 28, 1]" + mlp, "a.toml");
  const Recipe fashion = parse_recipe("name = \"a\"\n[data]\ndataset = \"fashion_mnist\"" + mlp, "b.toml");
  fresh_dir_with(synthetic, TrainState{4, 0, 4, LossStats{}, 0.0});
  CHECK_THROWS_WITH_AS(train(fashion, quiet(dir.string())),
                       doctest::Contains("trained on data.dataset = \"synthetic\", b.toml trains on \"fashion_mnist\""),
                       UserError);
  // A run ended by train.steps mid-epoch: rerunning it changes neither metrics.jsonl nor summary.json.
  fs::remove_all(dir);
  Recipe capped = recipe;
  capped.train.steps = 5;
  train(capped, quiet(dir.string()));
  auto text = [&](const char* name) {
    std::ifstream in(dir / name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string metrics = text("metrics.jsonl"), summary = text("summary.json");
  REQUIRE(metrics.find("\"complete\":false") != std::string::npos);
  CHECK(train(capped, quiet(dir.string())).steps == 5);
  CHECK(text("metrics.jsonl") == metrics);
  CHECK(text("summary.json") == summary);
  fs::remove_all(dir);
}

TEST_CASE("recipe: --set overrides, unknown keys, wrong types, bad values, all with file and line") {
  const fs::path p = fs::temp_directory_path() / "distrain_recipe.toml";
  std::ofstream(p) << kRecipe;
  const Recipe r = load_recipe(p.string(), {"optimizer.learning_rate=0.01", "strategy.devices=[\"cpu:0\"]",
                                            "model.layers.6.units=20", "name=renamed run"});
  CHECK(r.optimizer.learning_rate == 0.01);
  CHECK(r.name == "renamed run");  // not TOML: taken as a string
  CHECK(r.model().layers[6].output == Shape{20});
  CHECK(r.resolved_text().find("learning_rate = 0.01") != std::string::npos);

  CHECK_THROWS_WITH_AS(load_recipe(p.string(), {"optimizer.learning_rat=0.01"}), doctest::Contains("optimizer.learning_rat: unknown key"), UserError);
  CHECK_THROWS_WITH_AS(load_recipe(p.string(), {"strategy.per_replica_batch=0"}), doctest::Contains("strategy.per_replica_batch: must be positive, got 0"), UserError);
  CHECK_THROWS_WITH_AS(load_recipe(p.string(), {"train.epochs=-1"}), doctest::Contains("train.epochs: must be positive"), UserError);
  CHECK_THROWS_WITH_AS(load_recipe(p.string(), {"train.epochs=\"ten\""}), doctest::Contains("train.epochs: expected an integer"), UserError);
  CHECK_THROWS_WITH_AS(load_recipe(p.string(), {"strategy.name=tpu"}), doctest::Contains("strategy.name: 'tpu' is not one of \"one_device\", \"mirrored\""), UserError);
  CHECK_THROWS_WITH_AS(load_recipe(p.string(), {"model.layers.99.units=3"}), doctest::Contains("'99' is not an index"), UserError);
  CHECK_THROWS_WITH_AS(load_recipe(p.string(), {"novalue"}), doctest::Contains("expected KEY=VALUE"), UserError);
  CHECK_THROWS_WITH_AS(parse_recipe("seed = 1\n[model\n", "bad.toml"), doctest::Contains("bad.toml:2: malformed TOML"), UserError);
  CHECK_THROWS_WITH_AS(parse_recipe("seed = 1\n[data]\ndataset = 'cifar'\n", "bad.toml"),
                       doctest::Contains("bad.toml:3: data.dataset: 'cifar' is not one of"), UserError);
  CHECK_THROWS_WITH_AS(load_recipe("/nonexistent.toml"), doctest::Contains("/nonexistent.toml: recipe not found"), UserError);
}

}  // namespace distrain::test

namespace distrain::test {

// checkpoint.keep_best and train.early_stopping, judged on validations every
// train.validate_every_steps and at epoch ends. min_delta = 1e9 makes every validation after
// the first "no better", so the stop is known in advance: the first validation (step 4) is
// the best, the second (step 8) waits 1, and patience 1 stops there, mid-epoch.
TEST_CASE("early stopping and keep_best: the best validation kept, the run stopped after patience, its state resumed") {
  const std::string keys = "\n[train.early_stopping]\npatience = 1\nmin_delta = 1e9\nrestore_best = true\n";
  std::string text = std::regex_replace(std::string(kRecipe), std::regex("\\[train\\]\nepochs = 3"),
                                        "[train]\nepochs = 3\nvalidate_every_steps = 4" + keys);
  text = std::regex_replace(text, std::regex("keep = 2"), "keep = 2\nkeep_best = \"val_loss\"");
  const Recipe recipe = parse_recipe(text, "early.toml");
  CHECK(recipe.train.early_stopping.patience == 1);
  const fs::path a = fs::temp_directory_path() / "distrain_early_a", b = fs::temp_directory_path() / "distrain_early_b";
  fs::remove_all(a);
  fs::remove_all(b);
  const TrainSummary full = train(recipe, quiet(a));
  CHECK(full.steps == 8);
  CHECK(full.best.stopped_early);
  CHECK(full.best.best_step == 4);
  const CheckpointHeader best = read_checkpoint_header((a / "best.h5").string());
  CHECK(best.state.step == 4);
  CHECK(best.state.monitor.best_step == 4);
  // restore_best: the run's last checkpoint holds the best validation's weights.
  CHECK(final_weights(recipe, full.last_checkpoint) == final_weights(recipe, (a / "best.h5").string()));
  CHECK(read_checkpoint_header(full.last_checkpoint).state.monitor.stopped_early);
  const Json summary = Json::parse(std::ifstream(a / "summary.json"));
  CHECK(summary["stopped_early_at"] == 8);
  CHECK(summary["best"]["step"] == 4);
  CHECK(untimed_metrics(a / "metrics.jsonl").size() == 1);  // the stopped epoch, reported as far as it went
  // A rerun does not train on: the run is complete.
  CHECK(train(recipe, quiet(a)).steps == 8);
  // Crashed after step 5 (past the best, no checkpoint of the record yet but best.h5's)
  // and resumed from step 4's checkpoint: the same stop, the same weights.
  TrainOptions crash = quiet(b);
  crash.crash_after_step = 5;
  train(recipe, crash);
  const TrainSummary resumed = train(recipe, quiet(b));
  CHECK(resumed.steps == 8);
  CHECK(resumed.best.best_step == 4);
  CHECK(final_weights(recipe, full.last_checkpoint) == final_weights(recipe, resumed.last_checkpoint));
  // The keys' refusals name them.
  CHECK_THROWS_WITH_AS(parse_recipe(std::regex_replace(text, std::regex("patience = 1"), "patience = 0"), "e.toml"),
                       doctest::Contains("train.early_stopping.patience: must be at least 1"), UserError);
  CHECK_THROWS_WITH_AS(parse_recipe(std::regex_replace(text, std::regex("keep_best = \"val_loss\""), "keep_best = \"val_accuracy\""),
                                    "e.toml"),
                       doctest::Contains("restore_best reads the best weights from checkpoint.keep_best; set checkpoint.keep_best = \"val_loss\""),
                       UserError);
  CHECK_THROWS_WITH_AS(parse_recipe(text, "e.toml", {"train.validate=false"}), doctest::Contains("needs train.validate = true"),
                       UserError);
}

}  // namespace distrain::test
