#include "datasets/bpe_tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <fmt/format.h>
#include <pcre2.h>

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "core/base/error.hpp"
#include "core/base/json.hpp"
#include "datasets/utf8.hpp"

namespace distrain {

namespace {

// GPT-2's split: contractions, letters, digits, other symbols (each with one leading
// space), and runs of spaces.
constexpr const char* kGpt2Split = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// GPT-2's byte-to-unicode table: printable bytes stand for themselves, the others for the
// code points from U+0100 on, so that every byte is a visible character of the vocabulary.
struct ByteTable {
  std::string of_byte[256];              // UTF-8 of each byte's character
  std::unordered_map<char32_t, uint8_t> byte_of;
  ByteTable() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const char32_t c = printable ? static_cast<char32_t>(b) : next++;
      append_utf8(of_byte[b], c);
      byte_of[c] = static_cast<uint8_t>(b);
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}

// A pre-tokenizer's split pattern, compiled by PCRE2 for UTF-8 with Unicode properties
// (\s, \p{L} as the tokenizers library's Oniguruma reads them) and JIT-compiled.
class SplitRegex {
 public:
  SplitRegex(const std::string& pattern, const std::string& path) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK,
                          &error, &offset, nullptr);
    if (!code_) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw UserError(fmt::format("{}: the pre-tokenizer's pattern does not compile at offset {}: {}", path, offset,
                                  reinterpret_cast<const char*>(message)));
    }
    jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
    match_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;
  ~SplitRegex() {
    pcre2_match_data_free(match_);
    pcre2_code_free(code_);
  }

  // `piece` cut into the matches and the text between them (HF's "Isolated" behaviour).
  void split(std::string_view piece, std::vector<std::string_view>& out) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
    size_t at = 0, kept = 0;
    while (at < piece.size()) {
      const int rc = jit_ ? pcre2_jit_match(code_, subject, piece.size(), at, PCRE2_NO_UTF_CHECK, match_, nullptr)
                          : pcre2_match(code_, subject, piece.size(), at, PCRE2_NO_UTF_CHECK, match_, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* range = pcre2_get_ovector_pointer(match_);
      if (range[1] == range[0]) {  // an empty match: step over one character
        at = range[0] + 1;
        while (at < piece.size() && (static_cast<unsigned char>(piece[at]) & 0xc0) == 0x80) ++at;
        continue;
      }
      if (range[0] > kept) out.push_back(piece.substr(kept, range[0] - kept));
      out.push_back(piece.substr(range[0], range[1] - range[0]));
      kept = at = range[1];
    }
    if (kept < piece.size()) out.push_back(piece.substr(kept));
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* match_ = nullptr;
  bool jit_ = false;
};

struct AddedToken {
  std::string content;
  int32_t id;
};

// A merge of two adjacent symbols: its rank (lower merges first) and the symbol it makes.
struct Merge {
  int32_t rank, id;
};

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(const Json& j, const std::string& path) : path_(path) {
    read_normalizer(j, path);
    read_model(j.at("model"), path);
    read_pre_tokenizer(j, path);
    read_added_tokens(j, path);
    prepare_decoding();
  }

  std::vector<int32_t> encode(std::string_view text, const std::string& source) const override {
    check_utf8(text, source);
    std::vector<int32_t> ids;
    size_t plain = 0;
    for (size_t i = 0; i < text.size();) {
      const AddedToken* special = added_at(text, i);
      if (!special) {
        ++i;
        continue;
      }
      encode_plain(text.substr(plain, i - plain), ids);
      ids.push_back(special->id);
      i += special->content.size();
      plain = i;
    }
    encode_plain(text.substr(plain), ids);
    return ids;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (const int32_t id : ids) {
      DT_USER_CHECK(id >= 0 && id < vocab_size() && !token_of_[static_cast<size_t>(id)].empty(),
                    "token id {} is not in the vocabulary of {} ({} ids)", id, path_, vocab_size());
      out += text_of_[static_cast<size_t>(id)];
    }
    return out;
  }

  int64_t vocab_size() const override { return static_cast<int64_t>(token_of_.size()); }
  std::optional<int32_t> end_of_text() const override { return end_of_text_; }
  std::string describe() const override {
    return fmt::format("byte-level BPE, {} tokens, {} merges ({})", vocab_size(), merges_.size(), path_);
  }

 private:
  void read_normalizer(const Json& j, const std::string& path) {
    const auto n = j.find("normalizer");
    if (n == j.end() || n->is_null()) return;
    const std::string type = n->value("type", "");
    DT_USER_CHECK(type == "Sequence" && n->value("normalizers", Json::array()).empty(),
                  "{}: normalizer \"{}\" is not supported (distrain reads byte-level BPE files without a normalizer, "
                  "as GPT-2's and Llama 3's)", path, type);
  }

  void read_model(const Json& m, const std::string& path) {
    const std::string type = m.value("type", "BPE");
    DT_USER_CHECK(type == "BPE", "{}: model type \"{}\" is not supported; distrain reads byte-level BPE tokenizer.json "
                  "files and SentencePiece .model files", path, type);
    ignore_merges_ = m.value("ignore_merges", false);
    const Json& vocab = m.at("vocab");
    DT_USER_CHECK(vocab.is_object() && !vocab.empty(), "{}: model.vocab is not a table of tokens", path);
    // Ids are dense in every tokenizer file: one far beyond the entries is refused rather
    // than given a table of that size.
    const auto id_limit = static_cast<int64_t>(vocab.size()) + kSpareIds;
    for (const auto& [token, id] : vocab.items()) {
      DT_USER_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < id_limit,
                    "{}: model.vocab: the id of \"{}\" is not an id below {} (the entries and some spare)", path, token,
                    id_limit);
      set_token(token, id.get<int32_t>());
    }
    const Json& merges = m.at("merges");
    DT_USER_CHECK(merges.is_array(), "{}: model.merges is not a list", path);
    for (size_t rank = 0; rank < merges.size(); ++rank) read_merge(merges[rank], static_cast<int32_t>(rank), path);
  }

  void set_token(const std::string& token, int32_t id) {
    id_of_[token] = id;
    if (static_cast<size_t>(id) >= token_of_.size()) token_of_.resize(static_cast<size_t>(id) + 1);
    token_of_[static_cast<size_t>(id)] = token;
  }

  // "a b", or ["a", "b"] as newer files write it.
  void read_merge(const Json& merge, int32_t rank, const std::string& path) {
    std::string left, right;
    if (merge.is_string()) {
      const std::string s = merge.get<std::string>();
      const size_t space = s.find(' ', 1);
      DT_USER_CHECK(space != std::string::npos, "{}: merge {} \"{}\" is not two tokens", path, rank, s);
      left = s.substr(0, space), right = s.substr(space + 1);
    } else {
      DT_USER_CHECK(merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string(),
                    "{}: merge {} is not two tokens", path, rank);
      left = merge[0].get<std::string>(), right = merge[1].get<std::string>();
    }
    const auto id = [&](const std::string& token) {
      const auto it = id_of_.find(token);
      DT_USER_CHECK(it != id_of_.end(), "{}: merge {} \"{} {}\": \"{}\" is not in the vocabulary", path, rank, left, right, token);
      return it->second;
    };
    const int32_t a = id(left), b = id(right), merged = id(left + right);
    merges_.emplace(pair_key(a, b), Merge{rank, merged});
  }

  // ByteLevel alone (GPT-2), or a Sequence of Split patterns and a ByteLevel (Llama 3).
  void read_pre_tokenizer(const Json& j, const std::string& path) {
    const auto p = j.find("pre_tokenizer");
    DT_USER_CHECK(p != j.end() && p->is_object(), "{}: no pre_tokenizer: not a byte-level BPE tokenizer.json", path);
    const std::vector<Json> steps = p->value("type", "") == "Sequence" ? p->value("pretokenizers", std::vector<Json>{})
                                                                        : std::vector<Json>{*p};
    bool byte_level = false;
    for (const Json& step : steps) {
      const std::string type = step.value("type", "");
      if (type == "ByteLevel") {
        byte_level = true;
        add_prefix_space_ = step.value("add_prefix_space", false);
        if (step.value("use_regex", true)) splits_.push_back(std::make_unique<SplitRegex>(kGpt2Split, path));
        continue;
      }
      DT_USER_CHECK(type == "Split", "{}: pre-tokenizer \"{}\" is not supported (ByteLevel and Split are)", path, type);
      DT_USER_CHECK(step.value("behavior", "") == "Isolated" && !step.value("invert", false),
                    "{}: a Split pre-tokenizer with behavior \"{}\" is not supported (\"Isolated\" is)", path,
                    step.value("behavior", ""));
      const Json& pattern = step.at("pattern");
      DT_USER_CHECK(pattern.contains("Regex"), "{}: a Split pre-tokenizer of a plain string is not supported", path);
      splits_.push_back(std::make_unique<SplitRegex>(pattern.at("Regex").get<std::string>(), path));
    }
    DT_USER_CHECK(byte_level, "{}: the pre-tokenizer has no ByteLevel step: not a byte-level BPE tokenizer.json", path);
    for (int b = 0; b < 256; ++b) {
      const auto it = id_of_.find(byte_table().of_byte[b]);
      DT_USER_CHECK(it != id_of_.end(), "{}: the vocabulary has no token for byte 0x{:02x}: not a byte-level BPE", path, b);
      byte_id_[b] = it->second;
    }
  }

  void read_added_tokens(const Json& j, const std::string& path) {
    for (const Json& t : j.value("added_tokens", Json::array())) {
      const std::string content = t.at("content").get<std::string>();
      const auto id = t.at("id").get<int64_t>();
      DT_USER_CHECK(!content.empty() && id >= 0 && id < static_cast<int64_t>(token_of_.size()) + kSpareIds,
                    "{}: an added token without content, or with an id far beyond the vocabulary's", path);
      set_token(content, static_cast<int32_t>(id));
      added_.push_back({content, static_cast<int32_t>(id)});
      first_bytes_[static_cast<unsigned char>(content[0])] = true;
    }
    // Longest first, so that "<|end|>" is not taken for a prefix of "<|endoftext|>".
    std::stable_sort(added_.begin(), added_.end(),
                     [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
    for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|im_end|>"})
      if (const auto it = id_of_.find(name); it != id_of_.end() && !end_of_text_) end_of_text_ = it->second;
  }

  // Each id's text, once: an added token's content, a vocabulary token's characters mapped
  // back to their bytes (a character outside the byte table kept as it is).
  void prepare_decoding() {
    text_of_.resize(token_of_.size());
    for (size_t id = 0; id < token_of_.size(); ++id)
      for (const char32_t c : decode_utf8(token_of_[id], path_)) {
        const auto byte = byte_table().byte_of.find(c);
        if (byte != byte_table().byte_of.end()) text_of_[id] += static_cast<char>(byte->second);
        else append_utf8(text_of_[id], c);
      }
    for (const AddedToken& t : added_) text_of_[static_cast<size_t>(t.id)] = t.content;
  }

  const AddedToken* added_at(std::string_view text, size_t i) const {
    if (!first_bytes_[static_cast<unsigned char>(text[i])]) return nullptr;
    for (const AddedToken& t : added_)
      if (text.compare(i, t.content.size(), t.content) == 0) return &t;
    return nullptr;
  }

  // Text without added tokens: its words, each merged (or taken from the cache).
  void encode_plain(std::string_view text, std::vector<int32_t>& ids) const {
    if (text.empty()) return;
    std::string prefixed;
    if (add_prefix_space_ && text[0] != ' ') {
      prefixed = " " + std::string(text);
      text = prefixed;
    }
    std::vector<std::string_view> pieces{text}, next;
    for (const auto& split : splits_) {
      next.clear();
      for (const std::string_view piece : pieces) split->split(piece, next);
      pieces.swap(next);
    }
    for (const std::string_view word : pieces) {
      const auto cached = cache_.find(std::string(word));
      if (cached != cache_.end()) {
        ids.insert(ids.end(), cached->second.begin(), cached->second.end());
        continue;
      }
      std::vector<int32_t> merged = merge_word(word);
      ids.insert(ids.end(), merged.begin(), merged.end());
      if (cache_.size() < kCacheWords) cache_.emplace(std::string(word), std::move(merged));
    }
  }

  // BPE over the word's byte symbols: the adjacent pair of the lowest rank merges first
  // (the leftmost among equals), as the tokenizers library does, with a heap over a list.
  std::vector<int32_t> merge_word(std::string_view word) const {
    if (ignore_merges_) {
      std::string mapped;
      for (const char c : word) mapped += byte_table().of_byte[static_cast<unsigned char>(c)];
      if (const auto it = id_of_.find(mapped); it != id_of_.end()) return {it->second};
    }
    const size_t n = word.size();
    std::vector<int32_t> symbol(n);
    std::vector<int> prev(n), next(n);
    for (size_t i = 0; i < n; ++i) {
      symbol[i] = byte_id_[static_cast<unsigned char>(word[i])];
      prev[i] = static_cast<int>(i) - 1;
      next[i] = i + 1 < n ? static_cast<int>(i + 1) : -1;
    }
    using Candidate = std::tuple<int32_t, int, int32_t, int32_t>;  // rank, left position, left and right symbols
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    const auto offer = [&](int left) {
      if (left < 0 || next[left] < 0) return;
      const auto merge = merges_.find(pair_key(symbol[left], symbol[next[left]]));
      if (merge != merges_.end()) heap.emplace(merge->second.rank, left, symbol[left], symbol[next[left]]);
    };
    for (size_t i = 0; i + 1 < n; ++i) offer(static_cast<int>(i));
    while (!heap.empty()) {
      const auto [rank, left, a, b] = heap.top();
      heap.pop();
      const int right = next[left];
      if (symbol[left] != a || right < 0 || symbol[right] != b) continue;  // stale: a neighbour merged first
      symbol[left] = merges_.at(pair_key(a, b)).id;
      symbol[right] = -1;
      next[left] = next[right];
      if (next[right] >= 0) prev[next[right]] = left;
      offer(prev[left]);
      offer(left);
    }
    std::vector<int32_t> out;
    for (int i = 0; i >= 0; i = next[i]) out.push_back(symbol[static_cast<size_t>(i)]);
    return out;
  }

  static constexpr size_t kCacheWords = 1 << 20;
  static constexpr int64_t kSpareIds = 1 << 16;

  std::string path_;
  std::unordered_map<std::string, int32_t> id_of_;
  std::vector<std::string> token_of_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::vector<std::unique_ptr<SplitRegex>> splits_;
  bool add_prefix_space_ = false, ignore_merges_ = false;
  int32_t byte_id_[256] = {};
  std::vector<AddedToken> added_;
  std::vector<std::string> text_of_;  // decode's text of each id
  bool first_bytes_[256] = {};
  std::optional<int32_t> end_of_text_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> parse_bpe_tokenizer(const std::string& json, const std::string& path) {
  Json j;
  try {
    j = Json::parse(json);
  } catch (const Json::parse_error& e) {
    throw UserError(fmt::format("{}: not a tokenizer.json (JSON error at byte {}): {}", path, e.byte,
                                std::string(e.what()).substr(0, 120)));
  } catch (const Json::exception& e) {  // a number out of range, say
    throw UserError(fmt::format("{}: not a tokenizer.json: {}", path, std::string(e.what()).substr(0, 120)));
  }
  DT_USER_CHECK(j.is_object() && j.contains("model"), "{}: no \"model\": not a tokenizer.json", path);
  try {
    return std::make_unique<BpeTokenizer>(j, path);
  } catch (const Json::exception& e) {
    throw UserError(fmt::format("{}: a key of the tokenizer is missing or of another type: {}", path, e.what()));
  }
}

}  // namespace distrain
