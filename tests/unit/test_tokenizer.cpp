// Byte-level BPE from a tokenizer.json written here: merges by rank, added tokens, the
// GPT-2 byte table, ignore_merges, decoding back to the bytes, and the files refused.
// (tests/e2e/tokenizer_test.sh holds the ids against the tokenizers library's.)
#include <doctest/doctest.h>

#include "core/base/error.hpp"
#include "core/base/json.hpp"
#include "datasets/bpe_tokenizer.hpp"
#include "datasets/utf8.hpp"
#include "tests/fuzz/fuzz_inputs.hpp"

using namespace distrain;

namespace {

using fuzz::byte_level_char;

// 256 byte tokens (id = byte), then `extra` tokens from 256 on.
Json tokenizer_json(const std::vector<std::string>& extra, const std::vector<std::string>& merges, bool ignore_merges = false) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_char(b)] = b;
  for (size_t i = 0; i < extra.size(); ++i) vocab[extra[i]] = 256 + static_cast<int>(i);
  return Json{{"version", "1.0"},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"decoder", {{"type", "ByteLevel"}}},
              {"added_tokens", Json::array({{{"id", 300}, {"content", "<|endoftext|>"}, {"special", true}}})},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", ignore_merges}}}};
}

std::unique_ptr<Tokenizer> bpe(const Json& j) { return parse_bpe_tokenizer(j.dump(), "t.json"); }

}  // namespace

TEST_CASE("tokenizer: GPT-2's byte table (space, newline, printable bytes), and the fuzzer's tokenizer round-trips") {
  fuzz::tokenizer_input(std::vector<uint8_t>{1, 't', 'h', 'e', ' ', 't', 'h', 'e', 0xff});  // invalid UTF-8: a UserError
  const auto small = parse_bpe_tokenizer(fuzz::small_bpe_json(), "small.json");
  CHECK(small->encode("the the") == std::vector<int32_t>{257, 258});
  CHECK(byte_level_char(' ') == "\xc4\xa0");   // U+0120
  CHECK(byte_level_char('\n') == "\xc4\x8a");  // U+010A
  CHECK(byte_level_char(173) == "\xc5\x83");   // U+0143, the last
  CHECK(byte_level_char('a') == "a");
}

TEST_CASE("tokenizer: BPE merges the lowest rank first, words as GPT-2 splits them") {
  // he (256), the (257), Ġthe (258); "t h" ranks after "h e", so "the" is t + he.
  const auto t = bpe(tokenizer_json({"he", "the", "\xc4\xa0the", "th"}, {"h e", "t he", "\xc4\xa0 the", "t h"}));
  CHECK(t->encode("the the") == std::vector<int32_t>{257, 258});
  CHECK(t->encode("they") == std::vector<int32_t>{257, 'y'});
  CHECK(t->encode("tthe") == std::vector<int32_t>{'t', 257});
  CHECK(t->encode("a<|endoftext|>b") == std::vector<int32_t>{'a', 300, 'b'});
  CHECK(t->end_of_text() == 300);
  CHECK(t->vocab_size() == 301);
  const std::string text = "h\xc3\xa9llo  \xe4\xb8\x96\xe7\x95\x8c\n\n\tthe end<|endoftext|> \xf0\x9f\x99\x82 42";
  CHECK(t->decode(t->encode(text)) == text);
  CHECK_THROWS_WITH_AS(t->encode("ok \xff"), doctest::Contains("text: invalid UTF-8 at byte offset 3"), UserError);
  CHECK_THROWS_WITH_AS(t->decode({299}), doctest::Contains("token id 299 is not in the vocabulary of t.json"), UserError);
}

TEST_CASE("tokenizer: ignore_merges takes a word the vocabulary holds whole") {
  const std::vector<std::string> extra{"\xc4\xa0world"};
  CHECK(bpe(tokenizer_json(extra, {}, true))->encode(" world") == std::vector<int32_t>{256});
  CHECK(bpe(tokenizer_json(extra, {}, false))->encode(" world").size() == 6);
}

TEST_CASE("tokenizer: files that are not byte-level BPE are refused, naming what is wrong") {
  Json j = tokenizer_json({}, {});
  j["model"]["type"] = "WordPiece";
  CHECK_THROWS_WITH_AS(bpe(j), doctest::Contains("t.json: model type \"WordPiece\" is not supported"), UserError);
  CHECK_THROWS_WITH_AS(bpe(tokenizer_json({}, {"z zz"})), doctest::Contains("merge 0 \"z zz\": \"zz\" is not in the vocabulary"),
                       UserError);
  CHECK_THROWS_WITH_AS(parse_bpe_tokenizer(tokenizer_json({}, {}).dump().substr(0, 500), "t.json"),
                       doctest::Contains("t.json: not a tokenizer.json (JSON error at byte"), UserError);
  CHECK_THROWS_WITH_AS(parse_bpe_tokenizer(R"({"model":88e899278.00})", "t.json"),  // found by fuzz_tokenizer
                       doctest::Contains("t.json: not a tokenizer.json"), UserError);
  j = tokenizer_json({}, {});
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  CHECK_THROWS_WITH_AS(bpe(j), doctest::Contains("pre-tokenizer \"Whitespace\" is not supported"), UserError);
  j = tokenizer_json({}, {});
  j["normalizer"] = {{"type", "NFC"}};
  CHECK_THROWS_WITH_AS(bpe(j), doctest::Contains("normalizer \"NFC\" is not supported"), UserError);
  j = tokenizer_json({}, {});
  j["model"]["vocab"].erase(byte_level_char(7));
  CHECK_THROWS_WITH_AS(bpe(j), doctest::Contains("no token for byte 0x07"), UserError);
}
