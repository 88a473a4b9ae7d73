// distrain generate --ckpt CKPT|RUN_DIR [--prompt TEXT | --prompt-ids IDS] [--ids] [--tokens N]
//                   [--temperature T] [--top-k K] [--seed S] [--set KEY=VALUE]... [--device D]:
// text (or with --ids token ids) from a language model's checkpoint, the prompt first,
// printed as it is sampled, ending early at the vocabulary's end-of-text token.
#include <charconv>
#include <cmath>
#include <optional>

#include "cli/commands.hpp"
#include "cli/inference.hpp"
#include "core/train/generate.hpp"
#include "datasets/vocabulary.hpp"

namespace distrain::cli {

namespace {

struct GenerateArgs {
  std::string ckpt, prompt = "\n", prompt_ids, device = "cpu:0";
  bool ids = false;
  std::vector<std::string> overrides;
  SamplingSpec sampling{300, 0.8, 200, 1337};
};

// --prompt-ids: ids separated by spaces or commas, each within the vocabulary.
std::vector<int32_t> parse_ids(const std::string& text, int64_t vocabulary) {
  std::vector<int32_t> ids;
  std::string word;
  const auto take = [&] {
    if (word.empty()) return;
    int64_t id = -1;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), id);
    DT_USER_CHECK(ec == std::errc{} && end == word.data() + word.size() && id >= 0 && id < vocabulary,
                  "--prompt-ids: '{}' is not a token id of the vocabulary of {}", word, vocabulary);
    ids.push_back(static_cast<int32_t>(id));
    word.clear();
  };
  for (const char c : text) {
    if (c == ' ' || c == ',' || c == '\n' || c == '\t') take();
    else word += c;
  }
  take();
  DT_USER_CHECK(!ids.empty(), "--prompt-ids: give at least one token id");
  return ids;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string s;
  for (const int32_t id : ids) s += fmt::format("{}{}", s.empty() ? "" : " ", id);
  return s;
}

void check_sampling(const SamplingSpec& s) {
  DT_USER_CHECK(s.tokens >= 0 && s.tokens <= 10'000'000, "--tokens {}: must be in [0, 10000000]", s.tokens);
  DT_USER_CHECK(std::isfinite(s.temperature) && s.temperature >= 0,
                "--temperature {}: must be a finite number >= 0 (0: always the likeliest token)", s.temperature);
  DT_USER_CHECK(s.top_k >= 0, "--top-k {}: must be >= 0 (0: sample among all tokens)", s.top_k);
}

void generate_text(const GenerateArgs& a) {
  check_sampling(a.sampling);
  const LoadedCheckpoint loaded = load_for_inference("generate", a.ckpt, a.overrides, a.device);
  DT_USER_CHECK(!loaded.header.vocabulary.empty(),
                "{}: no vocabulary in this checkpoint: generate needs a language model trained on token data "
                "(data.dataset = \"text\" or \"tokens\")",
                loaded.header.path);
  const Vocabulary vocabulary = Vocabulary::from_text(loaded.header.vocabulary, loaded.header.path + " (vocabulary)");
  const bool as_ids = a.ids || !vocabulary.decodes();
  DT_USER_CHECK(!a.prompt.empty(), "--prompt: give at least one character to start from");
  DT_USER_CHECK(vocabulary.decodes() || !a.prompt_ids.empty(),
                "{}: its gpt2 vocabulary has no tokenizer here: start from token ids (--prompt-ids \"50256\"); the "
                "output is ids",
                loaded.header.path);
  std::vector<int32_t> context =
      a.prompt_ids.empty() ? vocabulary.encode(a.prompt, "--prompt") : parse_ids(a.prompt_ids, vocabulary.size());
  auto strategy = strategy_with_weights(loaded);
  Model& model = strategy->model();
  DT_USER_CHECK(model.input_dtype() == DType::i32 && model.output_shape().rank() == 2 &&
                    model.output_shape()[1] >= vocabulary.size(),
                "{}: its model is not a language model over its vocabulary of {} tokens", loaded.header.path,
                vocabulary.size());
  print_out(as_ids ? ids_text(context) : a.prompt_ids.empty() ? a.prompt : vocabulary.decode(context));
  const std::optional<int32_t> end = vocabulary.end_of_text();
  generate(model, context, a.sampling, [&](int32_t token) {
    DT_USER_CHECK(token < vocabulary.size(), "{}: the model gave token {}, outside its vocabulary of {}",
                  loaded.header.path, token, vocabulary.size());
    if (as_ids) print_out(fmt::format(" {}", token));
    if (token == end) return false;  // the document ends
    if (!as_ids) print_out(vocabulary.decode({token}));
    return true;
  });
  print_out("\n");
}

}  // namespace

void register_generate(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Text from a language model's checkpoint, sampled token by token");
  auto a = std::make_shared<GenerateArgs>();
  cmd->add_option("--ckpt", a->ckpt, "Checkpoint file (ckpt-<step>.h5), or a run folder (its newest checkpoint)")->required();
  auto* prompt = cmd->add_option("--prompt", a->prompt, "Text to start from (in the model's vocabulary); default a newline");
  cmd->add_option("--prompt-ids", a->prompt_ids, "Token ids to start from instead, e.g. \"50256\" or \"464,3290\"")
      ->excludes(prompt);
  cmd->add_flag("--ids", a->ids, "Print token ids, not text (always for a vocabulary without a decoder)");
  cmd->add_option("--tokens", a->sampling.tokens, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", a->sampling.temperature, "Divides the logits: lower is more conservative, 0 the likeliest")
      ->capture_default_str();
  cmd->add_option("--top-k", a->sampling.top_k, "Sample among the k likeliest tokens only (0: all)")->capture_default_str();
  cmd->add_option("--seed", a->sampling.seed, "Seed of the sampling: the same seed gives the same text")
      ->check(unsigned_64())
      ->capture_default_str();
  cmd->add_option("--set", a->overrides, "Override a key of the stored recipe (repeatable)");
  cmd->add_option("--device", a->device, "Device to run on")->capture_default_str();
  cmd->callback([a] { generate_text(*a); });
}

}  // namespace distrain::cli
