// distrain import HF_DIR --out DIR [--seq-len N] [--data FILE]: a Hugging Face model folder
// (config.json + safetensors) as a distrain recipe (DIR/recipe.toml) and checkpoint
// (DIR/model.h5) that `train` fine-tunes from (checkpoint.init_from) and `generate`,
// `eval` and `export --format hf` read. Everything is read and checked before anything is
// written; an unsupported architecture, config key or tensor is one line naming it.
#include <filesystem>

#include "cli/commands.hpp"
#include "core/backend/backend.hpp"
#include "core/base/error.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/hf_model.hpp"
#include "core/io/recipe.hpp"
#include "core/model/model.hpp"
#include "datasets/vocabulary.hpp"

namespace distrain::cli {

namespace {

namespace fs = std::filesystem;

struct ImportArgs {
  std::string dir, out, data = "data/tiny_shakespeare.txt";
  int64_t seq_len = 0;
};

// An optimizer that has taken no step: what an imported checkpoint records.
class FreshOptimizer final : public OptimizerState {
 public:
  std::string type() const override { return "adamw"; }
  int64_t iterations() const override { return 0; }
  void set_iterations(int64_t) override {}
  std::vector<std::string> slot_names() const override { return {}; }
  void read(const std::string&, const Variable&, std::vector<float>&) override {}
  void write(const std::string&, const Variable&, const std::vector<float>&) override {}
};

// The [data] table: the model's own tokenizer where the folder has one it reads.
std::string data_table(const ImportArgs& a, const HfImport& m, const std::string& tokenizer, std::string& note) {
  std::string t = fmt::format("[data]\ndataset = \"text\"\npath = \"{}\"   # your text: --set data.path=FILE\n", a.data);
  if (!tokenizer.empty()) return t + fmt::format("tokenizer = \"{}\"\nseq_len = {}\n", tokenizer, m.seq_len);
  note = fmt::format("no tokenizer.json distrain reads in {}: set data.tokenizer to the model's before training", a.dir);
  return t + fmt::format("tokenizer = \"tokenizer.json\"   # none read from {}: give the model's\nseq_len = {}\n", a.dir,
                         m.seq_len);
}

std::string recipe_text(const ImportArgs& a, const HfImport& m, const std::string& tokenizer, const std::string& weights,
                        std::string& note) {
  return fmt::format(R"(# {arch} imported from {dir} ({tensors} tensors, {dtype}) by distrain import.
# Fine-tune: distrain train THIS_FILE --set data.path=YOUR_TEXT
name = "{name}"
seed = 0

{data}
{model}
[optimizer]
type = "adamw"
learning_rate = 2e-5
weight_decay = 0.0

[optimizer.schedule]
scaling = "none"
warmup_steps = 10

[strategy]
name = "one_device"
per_replica_batch = 4

[train]
epochs = 1

[checkpoint]
init_from = "{weights}"
)",
                     fmt::arg("arch", m.architecture), fmt::arg("dir", a.dir), fmt::arg("tensors", m.tensors),
                     fmt::arg("dtype", st_dtype_name(m.dtype)), fmt::arg("name", fs::path(a.dir).filename().string()),
                     fmt::arg("data", data_table(a, m, tokenizer, note)), fmt::arg("model", m.model_toml),
                     fmt::arg("weights", weights));
}

// The imported values written into a model built from the recipe, every variable once.
void fill(Model& model, HfImport& m) {
  ArenaModelState state(model.params());
  const auto& vars = model.params().variables();
  for (size_t id = 0; id < vars.size(); ++id) {
    const std::string key = vars[id].layer + "/" + vars[id].name;
    const auto it = m.values.find(key);
    DT_CHECK(it != m.values.end() && static_cast<int64_t>(it->second.size()) == vars[id].full_shape.numel(),
             "import: no values of {} {}", key, vars[id].full_shape.str());
    state.write(static_cast<int>(id), it->second);
    m.values.erase(it);
  }
  DT_CHECK(m.values.empty(), "import: {} values have no variable (first: {})", m.values.size(), m.values.begin()->first);
}

void import_model(const ImportArgs& a) {
  DT_USER_CHECK(!fs::exists(a.out) || fs::is_empty(a.out), "--out {}: exists and is not empty", a.out);
  HfImport m = read_hf_model(a.dir, a.seq_len);
  const fs::path out = fs::absolute(a.out);
  const fs::path hf_tokenizer = fs::path(a.dir) / "tokenizer.json";
  std::string tokenizer;
  if (fs::exists(hf_tokenizer)) {
    try {
      Vocabulary::tokenizer(hf_tokenizer.string());
      tokenizer = (out / "tokenizer.json").string();
    } catch (const UserError& e) {
      fmt::print("note: {}\n", e.what());
    }
  }
  std::string note;
  const std::string weights = (out / "model.h5").string();
  const std::string text = recipe_text(a, m, tokenizer, weights, note);
  const Recipe recipe = parse_recipe(text, (out / "recipe.toml").string());
  Model model(recipe.model(), host_backend());
  fill(model, m);
  fs::create_directories(out);
  if (!tokenizer.empty()) fs::copy_file(hf_tokenizer, tokenizer);
  {
    std::ofstream(out / "recipe.toml") << text;
  }
  ArenaModelState state(model.params());
  FreshOptimizer optimizer;
  save_checkpoint(weights, state, optimizer, TrainState{}, text, true,
                  tokenizer.empty() ? "" : Vocabulary::tokenizer(tokenizer).to_text());
  fmt::print("imported {} ({}, {} parameters, {} tensors {}) into {}\n  recipe {}\n  weights {}\n", a.dir, m.architecture,
             model.params().values().numel(), m.tensors, st_dtype_name(m.dtype), out.string(),
             (out / "recipe.toml").string(), weights);
  if (!note.empty()) fmt::print("note: {}\n", note);
}

}  // namespace

void register_import(CLI::App& app) {
  auto* cmd = app.add_subcommand("import", "A Hugging Face model folder (GPT-2, Llama, Mistral, Qwen2) as a recipe and checkpoint");
  auto a = std::make_shared<ImportArgs>();
  cmd->add_option("dir", a->dir, "The folder: config.json and model.safetensors (or its sharded index)")->required();
  cmd->add_option("--out", a->out, "Folder to write recipe.toml, model.h5 and tokenizer.json into (new or empty)")->required();
  cmd->add_option("--seq-len", a->seq_len, "Sequence length of the recipe (default: the model's context, at most 1,024)")
      ->check(at_least(1));
  cmd->add_option("--data", a->data, "The recipe's text file (default: data/tiny_shakespeare.txt)");
  cmd->callback([a] { import_model(*a); });
}

}  // namespace distrain::cli
