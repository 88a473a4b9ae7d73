// distrain tokenize --tokenizer PATH [FILE]... [--count] [--decode]: a tokenizer's ids for
// text files (standard input without FILE), one line of ids per file, to hold against
// another tool; --count: the tokens of each file and its bytes per token; --decode: the
// files hold ids (separated by white space) and their text is printed.
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "core/base/error.hpp"
#include "datasets/tokenizer.hpp"

namespace distrain::cli {

namespace {

struct TokenizeArgs {
  std::string tokenizer;
  std::vector<std::string> files;
  bool count = false, decode = false;
};

std::string read_input(const std::string& file) {
  std::stringstream text;
  if (file == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(file, std::ios::binary);
  DT_USER_CHECK(in, "{}: cannot read it", file);
  text << in.rdbuf();
  return text.str();
}

std::vector<int32_t> parse_ids(const std::string& text, const std::string& file) {
  std::vector<int32_t> ids;
  std::istringstream in(text);
  for (std::string word; in >> word;) {
    char* end = nullptr;
    const long long id = std::strtoll(word.c_str(), &end, 10);
    DT_USER_CHECK(*end == 0 && id >= 0 && id < (1LL << 31), "{}: '{}' is not a token id", file, word.substr(0, 40));
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

void tokenize_one(const Tokenizer& tokenizer, const TokenizeArgs& a, const std::string& file) {
  const std::string text = read_input(file);
  if (a.decode) {
    fmt::print("{}", tokenizer.decode(parse_ids(text, file)));
    return;
  }
  const std::vector<int32_t> ids = tokenizer.encode(text, file);
  if (a.count) {
    fmt::print("{}: {} tokens, {} bytes ({:.2f} bytes per token)\n", file, ids.size(), text.size(),
               ids.empty() ? 0.0 : static_cast<double>(text.size()) / static_cast<double>(ids.size()));
    return;
  }
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += fmt::format("{}{}", i ? " " : "", ids[i]);
  fmt::print("{}\n", line);
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenize", "Token ids of text files with a tokenizer (or, with --decode, the text of ids)");
  auto a = std::make_shared<TokenizeArgs>();
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer.json (byte-level BPE) or SentencePiece .model")->required();
  cmd->add_option("files", a->files, "Text files (standard input without any, or -)");
  cmd->add_flag("--count", a->count, "Print each file's token count instead of its ids");
  cmd->add_flag("--decode", a->decode, "The files hold token ids: print their text");
  cmd->callback([a] {
    DT_USER_CHECK(!(a->count && a->decode), "tokenize: --count and --decode exclude each other");
    const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(a->tokenizer);
    if (a->count) fmt::print("tokenizer: {}\n", tokenizer->describe());
    const std::vector<std::string> files = a->files.empty() ? std::vector<std::string>{"-"} : a->files;
    for (const std::string& file : files) tokenize_one(*tokenizer, *a, file);
  });
}

}  // namespace distrain::cli
