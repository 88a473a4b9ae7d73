#include "datasets/sentencepiece_tokenizer.hpp"

#include <fmt/format.h>

#include "core/base/error.hpp"
#include "datasets/sentencepiece_library.hpp"
#include "datasets/utf8.hpp"

namespace distrain {

namespace {

constexpr size_t kErrorBytes = 512;

// The plugin's calls that fill a buffer return the whole result's size and write at most
// the capacity given: `fill(data, capacity)` into `out`, once more into a buffer of that
// size when the first was short; `out` ends at the result's size. Returns the size, or the
// plugin's negative failure.
template <typename Buffer, typename Fill>
int64_t fill_growing(Buffer& out, Fill fill) {
  int64_t size = fill(out.data(), out.size());
  if (size > static_cast<int64_t>(out.size())) {
    out.resize(static_cast<size_t>(size));
    size = fill(out.data(), out.size());
  }
  if (size >= 0) out.resize(static_cast<size_t>(size));
  return size;
}

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(dt_sp_model* model, std::string path)
      : lib_(sentencepiece_library()), model_(model), path_(std::move(path)) {}
  ~SentencePieceTokenizer() override { lib_.free(model_); }
  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text, const std::string& source) const override {
    check_utf8(text, source);
    // Each byte gives at most one id (a piece, or the byte itself), plus the word marker
    // SentencePiece puts before the first word.
    std::vector<int32_t> ids(text.size() + 16);
    char err[kErrorBytes] = {};
    const int64_t count = fill_growing(ids, [&](int32_t* data, size_t capacity) {
      return lib_.encode(model_, text.data(), text.size(), data, capacity, err, sizeof err);
    });
    DT_USER_CHECK(count >= 0, "{}: SentencePiece cannot encode it: {}", source, err);
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    const int64_t tokens = vocab_size();  // one plugin call, not two an id
    for (const int32_t id : ids)
      DT_USER_CHECK(id >= 0 && id < tokens, "token id {} is outside {}'s {} tokens", id, path_, tokens);
    std::string text(ids.size() * 8 + 16, '\0');
    char err[kErrorBytes] = {};
    const int64_t size = fill_growing(text, [&](char* data, size_t capacity) {
      return lib_.decode(model_, ids.data(), ids.size(), data, capacity, err, sizeof err);
    });
    DT_USER_CHECK(size >= 0, "{}: SentencePiece cannot decode the ids: {}", path_, err);
    return text;
  }

  int64_t vocab_size() const override { return lib_.vocab_size(model_); }

  std::optional<int32_t> end_of_text() const override {
    const int32_t eos = lib_.eos(model_);
    return eos >= 0 ? std::optional<int32_t>(eos) : std::nullopt;
  }

  std::string describe() const override { return fmt::format("SentencePiece, {} tokens ({})", vocab_size(), path_); }

 private:
  const SentencePieceLibrary& lib_;
  dt_sp_model* model_;
  std::string path_;
};

void append_model(void* context, const char* bytes, size_t size) {
  static_cast<std::string*>(context)->append(bytes, size);
}

}  // namespace

std::unique_ptr<Tokenizer> parse_sentencepiece_model(const std::string& bytes, const std::string& path) {
  const SentencePieceLibrary& lib = sentencepiece_library();
  char err[kErrorBytes] = {};
  dt_sp_model* model = lib.load(bytes.data(), bytes.size(), err, sizeof err);
  DT_USER_CHECK(model, "{}: not a SentencePiece model ({})", path, err);
  return std::make_unique<SentencePieceTokenizer>(model, path);
}

std::string train_sentencepiece(std::string_view text, const std::string& source, const SentencePieceTraining& training) {
  check_utf8(text, source);
  DT_USER_CHECK(training.model_type == "bpe" || training.model_type == "unigram",
                "tokenizer train: --type {}: give bpe or unigram", training.model_type);
  // identity and no whitespace removal: the text decodes back byte for byte; byte fallback:
  // a character the vocabulary lacks is its UTF-8 bytes, never <unk>; a newline is a byte
  // piece (the trainer reads lines). No dummy prefix: a text is encoded whole, where a
  // line's first word follows a newline, not a space, so lines are learnt that way too.
  const std::string flags = fmt::format(
      "--vocab_size={} --model_type={} --character_coverage=1.0 --byte_fallback=true "
      "--normalization_rule_name=identity --remove_extra_whitespaces=false --split_digits=true "
      "--allow_whitespace_only_pieces=true --add_dummy_prefix=false --max_sentence_length=65536 --num_threads={} --minloglevel=2",
      training.vocab_size, training.model_type, training.threads);
  std::string model;
  char err[kErrorBytes] = {};
  const int rc = sentencepiece_library().train(flags.c_str(), text.data(), text.size(), append_model, &model, err,
                                               sizeof err);
  DT_USER_CHECK(rc == 0, "{}: SentencePiece's trainer: {}", source, err);
  return model;
}

}  // namespace distrain
