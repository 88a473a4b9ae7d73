// distrain tokenizer train TEXT... --vocab N --out tokenizer.model [--type bpe|unigram]:
// a subword tokenizer trained by SentencePiece's trainer on the user's text (files, or
// folders of them), for data.tokenizer and generate. The text is read whole and checked
// as UTF-8 first, so a bad byte is named before any training.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.hpp"
#include "core/base/error.hpp"
#include "datasets/sentencepiece_tokenizer.hpp"

namespace distrain::cli {

namespace {

namespace fs = std::filesystem;

struct TrainTokenizerArgs {
  std::vector<std::string> inputs;
  std::string out;
  int64_t vocab = 0;
  std::string type = "bpe";
  int threads = 0;
};

// The input's files: itself, or a folder's regular files (recursively, by name).
std::vector<fs::path> files_of(const std::string& input) {
  std::error_code ec;
  if (fs::is_regular_file(input, ec)) return {input};
  DT_USER_CHECK(fs::is_directory(input, ec), "{}: not found (tokenizer train takes text files or folders of them)", input);
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(input, ec))
    if (entry.is_regular_file()) files.push_back(entry.path());
  DT_USER_CHECK(!ec, "{}: cannot list it: {}", input, ec.message());
  DT_USER_CHECK(!files.empty(), "{}: the folder holds no files", input);
  std::sort(files.begin(), files.end());
  return files;
}

// Every file's text, each ending in a newline (the trainer reads lines).
std::string read_texts(const std::vector<std::string>& inputs) {
  std::string text;
  for (const std::string& input : inputs)
    for (const fs::path& file : files_of(input)) {
      std::ifstream in(file, std::ios::binary);
      DT_USER_CHECK(in, "{}: cannot read it", file.string());
      std::stringstream bytes;
      bytes << in.rdbuf();
      std::string one = bytes.str();
      if (!one.empty() && one.back() != '\n') one += '\n';
      text += one;
    }
  DT_USER_CHECK(!text.empty(), "tokenizer train: the text is empty");
  return text;
}

void write_atomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    DT_USER_CHECK(out, "{}: cannot create it", path);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    DT_USER_CHECK(out, "{}: cannot write it (disk full?)", path);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  DT_USER_CHECK(!ec, "{}: cannot write it: {}", path, ec.message());
}

void train_tokenizer(const TrainTokenizerArgs& a) {
  DT_USER_CHECK(fs::path(a.out).extension() == ".model",
                "--out {}: tokenizer train writes a SentencePiece .model (name it tokenizer.model)", a.out);
  DT_USER_CHECK(a.vocab >= 16 && a.vocab <= 1'000'000, "--vocab {}: give a vocabulary of 16 to 1000000 tokens", a.vocab);
  const auto start = std::chrono::steady_clock::now();
  const std::string text = read_texts(a.inputs);
  SentencePieceTraining training{a.vocab, a.type, std::max(1, a.threads)};
  const std::string source = a.inputs.size() == 1 ? a.inputs[0] : fmt::format("{} inputs", a.inputs.size());
  const std::string model = train_sentencepiece(text, source, training);
  write_atomically(a.out, model);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::unique_ptr<Tokenizer> tokenizer = parse_sentencepiece_model(model, a.out);
  const size_t tokens = tokenizer->encode(text, source).size();
  fmt::print("{}: {} {} tokens from {:.1f} MB of text in {:.1f} s; the text is {} tokens ({:.2f} bytes per token)\n",
             a.out, a.type, tokenizer->vocab_size(), static_cast<double>(text.size()) / 1e6, seconds, tokens,
             static_cast<double>(text.size()) / static_cast<double>(std::max<size_t>(tokens, 1)));
}

}  // namespace

void register_tokenizer(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenizer", "Make a tokenizer: tokenizer train TEXT... --vocab N --out tokenizer.model");
  cmd->require_subcommand(1);
  auto* train = cmd->add_subcommand("train", "Train a subword tokenizer (SentencePiece BPE or unigram) on text files");
  auto a = std::make_shared<TrainTokenizerArgs>();
  train->add_option("text", a->inputs, "Text files or folders of them (UTF-8)")->required();
  train->add_option("--vocab", a->vocab, "Vocabulary size, special and byte tokens included")->required();
  train->add_option("--out", a->out, "The tokenizer to write (a SentencePiece .model)")->required();
  train->add_option("--type", a->type, "bpe (default) or unigram");
  train->add_option("--threads", a->threads, "Trainer threads (default 1)");
  train->callback([a] { train_tokenizer(*a); });
}

}  // namespace distrain::cli
