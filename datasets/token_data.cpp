#include "datasets/token_data.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/base/crc32c.hpp"
#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/log.hpp"
#include "datasets/token_files.hpp"

namespace distrain {

namespace {

namespace fs = std::filesystem;

std::string read_text_file(const std::string& path) {
  std::error_code ec;
  DT_USER_CHECK(!fs::is_directory(path, ec), "{}: a folder, not a text file (data.path)", path);
  const std::string problem = not_a_file(path);
  DT_USER_CHECK(problem.empty(), "{}: {} (data.path){}", path, problem, problem == "not found" ? relative_note(path) : "");
  const auto size = static_cast<int64_t>(fs::file_size(path, ec));
  DT_USER_CHECK(!ec, "{}: cannot read its size ({}) (data.path)", path, ec.message());
  // The text, its code points and its ids: about 13 bytes for each byte of a file.
  const std::optional<int64_t> available = available_host_memory();
  DT_USER_CHECK(!available || 13 * size <= *available, "{}: {} of text need about {} in memory, more than the {} free",
                path, format_bytes(size), format_bytes(13 * size), format_bytes(*available));
  std::ifstream in(path, std::ios::binary);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  DT_USER_CHECK(in && in.gcount() == size, "{}: cannot read all {} bytes (data.path)", path, size);
  return text;
}

// One split as a Dataset of windows; `what` names it in messages.
Dataset token_split(std::vector<int32_t> ids, const DataSpec& spec, std::shared_ptr<const Vocabulary> vocabulary,
                    const std::string& what) {
  DT_USER_CHECK(static_cast<int64_t>(ids.size()) > spec.seq_len, "{}: too short for seq_len = {}: {} tokens; a split "
                "needs at least seq_len + 1 (data.seq_len)", what, spec.seq_len, ids.size());
  Dataset d;
  d.source = what;
  d.example_shape = Shape{spec.seq_len};
  d.num_classes = vocabulary->size();
  d.tokens = std::move(ids);
  d.window = spec.seq_len;
  d.vocabulary = std::move(vocabulary);
  return d;
}

// validation_fraction = 0: a split without tokens, which validation refuses by name.
Dataset no_validation_split(const DataSpec& spec, std::shared_ptr<const Vocabulary> vocabulary) {
  Dataset d;
  d.source = spec.path + " (no validation split: data.validation_fraction = 0; set train.validate = false)";
  d.example_shape = Shape{spec.seq_len};
  d.num_classes = vocabulary->size();
  d.window = spec.seq_len;
  d.vocabulary = std::move(vocabulary);
  return d;
}

// The ids of `text` by a tokenizer, cached beside the text file as
// <file>.<CRC-32C of the text><of the tokenizer's vocabulary text>.tokens, so that a
// later run reads them instead of tokenizing again, and a changed text or tokenizer is
// tokenized anew; a folder that cannot be written is not cached in.
std::vector<int32_t> tokenized_text(const std::string& text, const Vocabulary& vocabulary, const std::string& path) {
  const std::string cache = fmt::format("{}.{:08x}{:08x}.tokens", path, crc32c(text), crc32c(vocabulary.to_text()));
  std::error_code ec;
  const auto cached_size = fs::file_size(cache, ec);
  if (!ec && cached_size % sizeof(int32_t) == 0) {
    std::vector<int32_t> ids(cached_size / sizeof(int32_t));
    std::ifstream in(cache, std::ios::binary);
    if (in.read(reinterpret_cast<char*>(ids.data()), static_cast<std::streamsize>(cached_size))) {
      log::info("{}: {} tokens read from {}", path, ids.size(), cache);
      return ids;
    }
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = vocabulary.encode(text, path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string partial = cache + ".partial";
  std::ofstream out(partial, std::ios::binary);
  out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * sizeof(int32_t)));
  out.close();
  if (out) fs::rename(partial, cache, ec);
  const bool kept = out && !ec;
  if (!kept) fs::remove(partial, ec);
  log::info("{}: {} tokens in {:.1f} s ({:.1f} MB/s){}", path, ids.size(), seconds,
            static_cast<double>(text.size()) / 1e6 / std::max(seconds, 1e-9),
            kept ? ", cached in " + cache : " (not cached: its folder cannot be written)");
  return ids;
}

// The vocabulary of dataset = "text": the tokenizer's, or bytes, or `text`'s characters.
Vocabulary text_vocabulary(const DataSpec& spec, const std::string& text) {
  if (!spec.tokenizer.empty()) return Vocabulary::tokenizer(spec.tokenizer);
  return spec.vocabulary == "bytes" ? Vocabulary::bytes() : Vocabulary::characters(text, spec.path);
}

}  // namespace

Splits read_text_splits(const DataSpec& spec) {
  const std::string text = read_text_file(spec.path);
  auto vocabulary = std::make_shared<const Vocabulary>(text_vocabulary(spec, text));
  std::vector<int32_t> ids = vocabulary->kind() == Vocabulary::Kind::tokenizer ? tokenized_text(text, *vocabulary, spec.path)
                                                                                : vocabulary->encode(text, spec.path);
  // The file's end validates, as nanoGPT: int(n * 0.9) tokens train.
  const auto train_count = static_cast<size_t>(static_cast<double>(ids.size()) * (1.0 - spec.validation_fraction));
  std::vector<int32_t> validation(ids.begin() + static_cast<std::ptrdiff_t>(train_count), ids.end());
  ids.resize(train_count);
  Dataset train = token_split(std::move(ids), spec, vocabulary, spec.path + " (training split)");
  if (spec.validation_fraction == 0) return Splits{std::move(train), no_validation_split(spec, vocabulary)};
  const std::string what = fmt::format("{} (validation split: the last {:g}%)", spec.path, 100 * spec.validation_fraction);
  return Splits{std::move(train), token_split(std::move(validation), spec, vocabulary, what)};
}

int64_t token_vocabulary_size(const DataSpec& spec) {
  if (!spec.tokenizer.empty()) return Vocabulary::tokenizer(spec.tokenizer).size();
  if (spec.dataset == "tokens") return spec.vocab_size;
  return text_vocabulary(spec, spec.vocabulary == "bytes" ? "" : read_text_file(spec.path)).size();
}

Splits read_token_splits(const DataSpec& given) {
  DataSpec spec = given;
  auto vocabulary = std::make_shared<const Vocabulary>(spec.tokenizer.empty() ? Vocabulary::gpt2(spec.vocab_size)
                                                                               : Vocabulary::tokenizer(spec.tokenizer));
  if (!spec.tokenizer.empty()) {
    DT_USER_CHECK(vocabulary->size() <= 65536, "{}: {} tokens, more than token files' uint16 ids can name (data.tokenizer)",
                  spec.tokenizer, vocabulary->size());
    DT_USER_CHECK(!spec.vocab_size_given || spec.vocab_size == vocabulary->size(),
                  "data.vocab_size = {} but data.tokenizer {} has {} tokens; leave vocab_size out or make them agree",
                  spec.vocab_size, spec.tokenizer, vocabulary->size());
    spec.vocab_size = vocabulary->size();
  }
  // A file named absolutely stays as it is; a relative one is inside data.path.
  const std::string train_path = (fs::path(spec.path) / spec.train_file).string();
  const std::string val_path = (fs::path(spec.path) / spec.val_file).string();
  Dataset train = token_split(read_token_file(train_path, spec.vocab_size, "data.path, data.train_file", spec.token_format), spec, vocabulary,
                              train_path);
  return Splits{std::move(train),
                token_split(read_token_file(val_path, spec.vocab_size, "data.path, data.val_file", spec.token_format), spec, vocabulary, val_path)};
}

}  // namespace distrain
