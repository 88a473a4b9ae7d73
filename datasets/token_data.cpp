#include "datasets/token_data.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "core/base/crc32c.hpp"
#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/log.hpp"
#include "datasets/text_files.hpp"
#include "datasets/utf8.hpp"
#include "datasets/token_files.hpp"

namespace distrain {

namespace {

namespace fs = std::filesystem;

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

// The hash that names a cache of `documents`' ids: their paths and texts, in order.
uint32_t documents_crc(const std::vector<TextDocument>& documents) {
  if (documents.size() == 1) return crc32c(documents[0].text);
  std::string manifest;
  for (const TextDocument& d : documents) manifest += fmt::format("{}\n{:08x}\n", d.path, crc32c(d.text));
  return crc32c(manifest);
}

// Every document's ids by the tokenizer, the tokenizer's end-of-text between documents
// (where it has one), saying how far it is once it takes over a second.
std::vector<int32_t> tokenize_documents(const std::vector<TextDocument>& documents, const Vocabulary& vocabulary,
                                        const std::string& path) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto said = start;
  int64_t total = 0, done = 0;
  for (const TextDocument& d : documents) total += static_cast<int64_t>(d.text.size());
  std::vector<int32_t> ids;
  for (size_t i = 0; i < documents.size(); ++i) {
    if (i > 0 && vocabulary.end_of_text()) ids.push_back(*vocabulary.end_of_text());
    const std::vector<int32_t> one = vocabulary.encode(documents[i].text, documents[i].path);
    ids.insert(ids.end(), one.begin(), one.end());
    done += static_cast<int64_t>(documents[i].text.size());
    if (Clock::now() - said > std::chrono::seconds(1) && i + 1 < documents.size()) {
      said = Clock::now();
      const double seconds = std::chrono::duration<double>(said - start).count();
      log::info("{}: tokenizing: {:.1f} of {:.1f} MB ({} of {} files), {:.1f} MB/s", path, done / 1e6, total / 1e6, i + 1,
                documents.size(), done / 1e6 / seconds);
    }
  }
  return ids;
}

// The ids of `documents` by a tokenizer, cached as
// <stem>.<CRC-32C of the texts><of the tokenizer's vocabulary text>.tokens (beside a single
// file, in the folder for several), so that a later run reads them instead of tokenizing
// again, and a changed text or tokenizer is tokenized anew; a folder that cannot be written
// is not cached in.
std::vector<int32_t> tokenized_text(const std::vector<TextDocument>& documents, const Vocabulary& vocabulary,
                                    const std::string& path) {
  const std::string cache = fmt::format("{}.{:08x}{:08x}.tokens", token_cache_stem(path, documents), documents_crc(documents),
                                        crc32c(vocabulary.to_text()));
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
  std::vector<int32_t> ids = tokenize_documents(documents, vocabulary, path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string partial = cache + ".partial";
  std::ofstream out(partial, std::ios::binary);
  out.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * sizeof(int32_t)));
  out.close();
  if (out) fs::rename(partial, cache, ec);
  const bool kept = out && !ec;
  if (!kept) fs::remove(partial, ec);
  int64_t bytes = 0;
  for (const TextDocument& d : documents) bytes += static_cast<int64_t>(d.text.size());
  log::info("{}: {} tokens{} in {:.1f} s ({:.1f} MB/s){}", path, ids.size(),
            documents.size() > 1 ? fmt::format(" from {} files", documents.size()) : "", seconds,
            static_cast<double>(bytes) / 1e6 / std::max(seconds, 1e-9),
            kept ? ", cached in " + cache : " (not cached: its folder cannot be written)");
  return ids;
}

// The documents' text, one after another (the characters vocabulary is made from all of it).
std::string joined_text(const std::vector<TextDocument>& documents) {
  std::string text;
  for (const TextDocument& d : documents) text += d.text;
  return text;
}

// The ids of the bytes or characters vocabulary: each document's, one after another.
std::vector<int32_t> character_ids(const std::vector<TextDocument>& documents, const Vocabulary& vocabulary) {
  std::vector<int32_t> ids;
  for (const TextDocument& d : documents) {
    const std::vector<int32_t> one = vocabulary.encode(d.text, d.path);
    ids.insert(ids.end(), one.begin(), one.end());
  }
  return ids;
}

// The vocabulary of dataset = "text": the tokenizer's, or bytes, or the documents' characters.
Vocabulary text_vocabulary(const DataSpec& spec, const std::vector<TextDocument>& documents) {
  if (!spec.tokenizer.empty()) return Vocabulary::tokenizer(spec.tokenizer);
  if (spec.vocabulary == "bytes") return Vocabulary::bytes();
  if (documents.size() == 1) return Vocabulary::characters(documents[0].text, documents[0].path);
  for (const TextDocument& d : documents) check_utf8(d.text, d.path);  // a bad byte named in its own file
  return Vocabulary::characters(joined_text(documents), spec.path);
}

}  // namespace

Splits read_text_splits(const DataSpec& spec) {
  const std::vector<TextDocument> documents = read_text_documents(spec.path);
  auto vocabulary = std::make_shared<const Vocabulary>(text_vocabulary(spec, documents));
  std::vector<int32_t> ids = vocabulary->kind() == Vocabulary::Kind::tokenizer ? tokenized_text(documents, *vocabulary, spec.path)
                                                                                : character_ids(documents, *vocabulary);
  // The text's end validates, as nanoGPT: int(n * 0.9) tokens train.
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
  if (spec.vocabulary == "bytes") return Vocabulary::bytes().size();
  return text_vocabulary(spec, read_text_documents(spec.path)).size();
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
