#include "datasets/token_data.hpp"

#include <filesystem>
#include <fstream>

#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"
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

}  // namespace

Splits read_text_splits(const DataSpec& spec) {
  const std::string text = read_text_file(spec.path);
  auto vocabulary = std::make_shared<const Vocabulary>(spec.vocabulary == "bytes" ? Vocabulary::bytes()
                                                                                  : Vocabulary::characters(text, spec.path));
  std::vector<int32_t> ids = vocabulary->encode(text, spec.path);
  // The file's end validates, as nanoGPT: int(n * 0.9) tokens train.
  const auto train_count = static_cast<size_t>(static_cast<double>(ids.size()) * (1.0 - spec.validation_fraction));
  std::vector<int32_t> validation(ids.begin() + static_cast<std::ptrdiff_t>(train_count), ids.end());
  ids.resize(train_count);
  Dataset train = token_split(std::move(ids), spec, vocabulary, spec.path + " (training split)");
  if (spec.validation_fraction == 0) return Splits{std::move(train), no_validation_split(spec, vocabulary)};
  const std::string what = fmt::format("{} (validation split: the last {:g}%)", spec.path, 100 * spec.validation_fraction);
  return Splits{std::move(train), token_split(std::move(validation), spec, vocabulary, what)};
}

Splits read_token_splits(const DataSpec& spec) {
  auto vocabulary = std::make_shared<const Vocabulary>(Vocabulary::gpt2(spec.vocab_size));
  // A file named absolutely stays as it is; a relative one is inside data.path.
  const std::string train_path = (fs::path(spec.path) / spec.train_file).string();
  const std::string val_path = (fs::path(spec.path) / spec.val_file).string();
  Dataset train = token_split(read_token_file(train_path, spec.vocab_size, "data.path, data.train_file", spec.token_format), spec, vocabulary,
                              train_path);
  return Splits{std::move(train),
                token_split(read_token_file(val_path, spec.vocab_size, "data.path, data.val_file", spec.token_format), spec, vocabulary, val_path)};
}

}  // namespace distrain
