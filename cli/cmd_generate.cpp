// distrain generate --ckpt CKPT|RUN_DIR [--prompt TEXT] [--tokens N] [--temperature T]
//                   [--top-k K] [--seed S] [--set KEY=VALUE]... [--device D]:
// text from a language model's checkpoint, the prompt first, printed as it is sampled.
#include <cmath>

#include "cli/commands.hpp"
#include "cli/inference.hpp"
#include "core/train/generate.hpp"
#include "datasets/vocabulary.hpp"

namespace distrain::cli {

namespace {

struct GenerateArgs {
  std::string ckpt, prompt = "\n", device = "cpu:0";
  std::vector<std::string> overrides;
  SamplingSpec sampling{300, 0.8, 200, 1337};
};

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
  DT_USER_CHECK(!a.prompt.empty(), "--prompt: give at least one character to start from");
  std::vector<int32_t> context = vocabulary.encode(a.prompt, "--prompt");
  auto strategy = strategy_with_weights(loaded);
  Model& model = strategy->model();
  DT_USER_CHECK(model.input_dtype() == DType::i32 && model.output_shape().rank() == 2 &&
                    model.output_shape()[1] >= vocabulary.size(),
                "{}: its model is not a language model over its vocabulary of {} tokens", loaded.header.path,
                vocabulary.size());
  print_out(a.prompt);
  generate(model, context, a.sampling, [&](int32_t token) {
    DT_USER_CHECK(token < vocabulary.size(), "{}: the model gave token {}, outside its vocabulary of {}",
                  loaded.header.path, token, vocabulary.size());
    print_out(vocabulary.decode({token}));
  });
  print_out("\n");
}

}  // namespace

void register_generate(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Text from a language model's checkpoint, sampled token by token");
  auto a = std::make_shared<GenerateArgs>();
  cmd->add_option("--ckpt", a->ckpt, "Checkpoint file (ckpt-<step>.h5), or a run folder (its newest checkpoint)")->required();
  cmd->add_option("--prompt", a->prompt, "Text to start from (in the model's vocabulary); default a newline");
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
