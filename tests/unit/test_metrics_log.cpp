// The run folder's JSON records: what a run writes reads back with a JSON parser, names
// and paths with quotes, backslashes and non-ASCII letters included; resume trimming.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/base/json.hpp"
#include "core/train/metrics_log.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

const char* kRecipe = R"(
name = "dé\"j\\à vu"
seed = 3
[data]
dataset = "synthetic"
train_examples = 96
test_examples = 32
image_shape = [6, 6, 1]
[model]
input_shape = [6, 6, 1]
layers = [{ type = "flatten" }, { type = "dense", units = 10 }]
[strategy]
per_replica_batch = 32
[train]
epochs = 2
)";

std::vector<Json> read_lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<Json> out;
  for (std::string line; std::getline(in, line);) out.push_back(Json::parse(line));
  return out;
}

TrainSummary train_quietly(const Recipe& recipe, const fs::path& dir) {
  TrainOptions o;
  o.run_dir = dir.string();
  o.fresh = true;
  o.progress.style = ProgressStyle::none;
  return train(recipe, o);
}

}  // namespace

TEST_CASE("metrics log: summary.json and metrics.jsonl parse, with an odd name and run folder intact") {
  const Recipe recipe = parse_recipe(kRecipe, "odd.toml");
  REQUIRE(recipe.name == "dé\"j\\à vu");
  const fs::path dir = fs::temp_directory_path() / "distrain \"odd\" d\\é run";
  const TrainSummary s = train_quietly(recipe, dir);

  const Json summary = Json::parse(std::ifstream(dir / "summary.json"));
  CHECK(summary["name"] == recipe.name);
  CHECK(summary["last_checkpoint"] == (dir / "ckpt-000006.h5").string());
  CHECK(summary["steps"] == 6);
  CHECK(summary["epochs_completed"] == 2);
  CHECK(summary["loss"].get<double>() == s.loss);  // full precision: the same double back
  CHECK(summary["val_loss"].get<double>() == s.val_loss);
  CHECK(summary["val_accuracy"].get<double>() == s.val_accuracy);

  const std::vector<Json> epochs = read_lines(dir / "metrics.jsonl");
  REQUIRE(epochs.size() == 2);
  CHECK(epochs[1]["epoch"] == 2);
  CHECK(epochs[1]["step"] == 6);
  CHECK(epochs[1]["complete"] == true);
  CHECK(epochs[1]["loss"].get<double>() == s.loss);
  CHECK(epochs[1]["val_accuracy"].get<double>() == s.val_accuracy);

  Recipe unvalidated = recipe;
  unvalidated.train.validate = false;
  train_quietly(unvalidated, dir);
  CHECK(Json::parse(std::ifstream(dir / "summary.json"))["val_loss"].is_null());
  CHECK(read_lines(dir / "metrics.jsonl").back()["val_accuracy"].is_null());
  fs::remove_all(dir);
}

TEST_CASE("metrics log: trimming keeps the completed epochs' lines as written and drops lines that are not JSON") {
  const fs::path file = fs::temp_directory_path() / "distrain_trim.jsonl";
  std::ofstream(file) << "{\"epoch\": 1, \"loss\": 2.5}\n{\"epoch\":2,\"loss\":2.25}\n{\"epoch\":3,\"loss\":2}\n{\"epoch\":4,\"lo\n";
  trim_metrics(file, 2);
  std::stringstream kept;
  kept << std::ifstream(file).rdbuf();
  CHECK(kept.str() == "{\"epoch\": 1, \"loss\": 2.5}\n{\"epoch\":2,\"loss\":2.25}\n");
  trim_metrics(file, 0);
  CHECK(fs::file_size(file) == 0);
  fs::remove(file);
}

}  // namespace distrain::test
