// Token data for language models: vocabularies (bytes, characters, gpt2), text split into
// training and validation, nanoGPT and llm.c token files and their errors, and the
// loader's windows (labels shifted by one, seeded offsets, contiguous without shuffle).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/base/error.hpp"
#include "core/io/recipe.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/data_placement.hpp"
#include "core/train/preflight.hpp"
#include "datasets/loader.hpp"
#include "datasets/token_data.hpp"
#include "datasets/token_files.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

const std::string kShakespeare = std::string(DISTRAIN_SOURCE_DIR) + "/data/tiny_shakespeare.txt";

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("distrain_test_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& d) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(d.data()), static_cast<std::streamsize>(d.size()));
}

void put_le32(std::vector<uint8_t>& d, uint32_t v) {
  for (int s = 0; s < 32; s += 8) d.push_back(static_cast<uint8_t>(v >> s));
}

// nanoGPT's layout: the ids as little-endian uint16, nothing else.
std::vector<uint8_t> raw_tokens(const std::vector<uint16_t>& ids) {
  std::vector<uint8_t> d;
  for (uint16_t id : ids) d.push_back(static_cast<uint8_t>(id)), d.push_back(static_cast<uint8_t>(id >> 8));
  return d;
}

// llm.c's layout: 256 int32 (magic, version, count, zeros), then the ids.
std::vector<uint8_t> llmc_tokens(const std::vector<uint16_t>& ids, uint32_t magic = 20240520, uint32_t version = 1,
                                 int64_t count = -1) {
  std::vector<uint8_t> d;
  put_le32(d, magic);
  put_le32(d, version);
  put_le32(d, static_cast<uint32_t>(count < 0 ? static_cast<int64_t>(ids.size()) : count));
  d.resize(1024, 0);
  const std::vector<uint8_t> body = raw_tokens(ids);
  d.insert(d.end(), body.begin(), body.end());
  return d;
}

std::vector<uint16_t> counting(int n, int modulo = 1000) {
  std::vector<uint16_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<uint16_t>(i % modulo);
  return ids;
}

// A split whose token at position i is i: a window's offset is its first token.
Dataset counting_split(int n, int64_t window) {
  Dataset d;
  d.source = "counting";
  for (int i = 0; i < n; ++i) d.tokens.push_back(i);
  d.window = window;
  d.example_shape = Shape{window};
  d.vocabulary = std::make_shared<const Vocabulary>(Vocabulary::gpt2(65536));
  d.num_classes = d.vocabulary->size();
  return d;
}

// The first token of each window of each batch of epoch `epoch`.
std::vector<int32_t> window_starts(const Dataset& d, LoaderSpec spec, int64_t epoch, int64_t first_batch = 0) {
  Loader loader(d, spec);
  loader.start(epoch, first_batch);
  std::vector<int32_t> starts;
  while (auto b = loader.next())
    for (const ReplicaSlice& s : b->replicas)
      for (int64_t i = 0; i < s.count; ++i) starts.push_back(s.tokens[static_cast<size_t>(i * d.window)]);
  return starts;
}

DataSpec tokens_spec(const fs::path& dir, int64_t seq_len = 4) {
  DataSpec spec;
  spec.dataset = "tokens";
  spec.path = dir.string();
  spec.seq_len = seq_len;
  return spec;
}

}  // namespace

TEST_CASE("vocabulary: bytes and characters encode and decode back, also from their text") {
  const std::string text = "Héllo, wörld €1 \xF0\x9F\x98\x80\n";  // 2-, 3- and 4-byte characters
  const Vocabulary bytes = Vocabulary::bytes();
  CHECK(bytes.size() == 256);
  CHECK(bytes.encode(text).size() == text.size());
  CHECK(bytes.encode("A") == std::vector<int32_t>{65});
  CHECK(bytes.decode(bytes.encode(text)) == text);
  CHECK(Vocabulary::from_text(bytes.to_text()).size() == 256);

  const Vocabulary chars = Vocabulary::characters(text, "t.txt");
  CHECK(chars.size() == 14);  // H é l o , space w ö r d € 1 😀 \n (l and space repeat)
  const std::vector<int32_t> ids = chars.encode(text);
  CHECK(ids.size() == 18);
  CHECK(chars.decode(ids) == text);
  CHECK(chars.encode("\n") == std::vector<int32_t>{0});  // sorted by code point: '\n' first
  const Vocabulary restored = Vocabulary::from_text(chars.to_text());
  CHECK(restored.kind() == Vocabulary::Kind::characters);
  CHECK(restored.to_text() == chars.to_text());
  CHECK(restored.encode(text) == ids);
  CHECK_THROWS_WITH_AS(chars.encode("Hz"), doctest::Contains("character 'z' (U+007A) is not in the vocabulary of 14"),
                       UserError);
  CHECK_THROWS_WITH_AS(chars.decode({14}), doctest::Contains("token 14 at position 0 is outside"), UserError);
}

TEST_CASE("vocabulary: gpt2 has no decoder, invalid UTF-8 and garbage texts are named errors") {
  const Vocabulary gpt2 = Vocabulary::gpt2(50257);
  CHECK(gpt2.size() == 50257);
  CHECK(Vocabulary::from_text(gpt2.to_text()).size() == 50257);
  CHECK(gpt2.to_text() == "gpt2:50257");
  CHECK_THROWS_WITH_AS(gpt2.decode({1, 2}), doctest::Contains("cannot decode"), UserError);
  CHECK_THROWS_WITH_AS(gpt2.encode("hi"), doctest::Contains("cannot encode"), UserError);
  CHECK_THROWS_WITH_AS(Vocabulary::characters("abc\xC3(", "bad.txt"), doctest::Contains("bad.txt: invalid UTF-8 at byte offset 3"),
                       UserError);
  CHECK_THROWS_WITH_AS(Vocabulary::characters("ab\xC0\xAF", "bad.txt"), doctest::Contains("byte offset 2"), UserError);  // overlong
  CHECK_THROWS_WITH_AS(Vocabulary::characters("\xED\xA0\x80", "bad.txt"), doctest::Contains("byte offset 0"), UserError);  // surrogate
  for (const std::string garbage : {"", "byte", "characters:", "characters:ba", "characters:aa", "gpt2:", "gpt2:12x",
                                    "gpt2:1", "gpt2:70000", "gpt2:-5"})
    CHECK_THROWS_WITH_AS(Vocabulary::from_text(garbage, "ckpt.h5"), doctest::Contains("ckpt.h5: "), UserError);
}

TEST_CASE("text data: Tiny Shakespeare has 65 characters, its last 10% validates") {
  DataSpec spec;
  spec.dataset = "text";
  spec.path = kShakespeare;
  spec.seq_len = 64;
  const Splits s = read_text_splits(spec);
  REQUIRE(s.train.vocabulary);
  CHECK(s.train.vocabulary->size() == 65);
  CHECK(s.train.num_classes == 65);
  CHECK(s.train.vocabulary.get() == s.test.vocabulary.get());
  CHECK(s.train.tokens.size() == 1003854);  // nanoGPT's shakespeare_char: int(n * 0.9) of 1115394
  CHECK(s.test.tokens.size() == 111540);
  CHECK(s.train.example_shape == Shape{64});
  CHECK(s.train.size() == (1003854 - 1) / 64);
  CHECK(s.train.vocabulary->decode({s.train.tokens.begin(), s.train.tokens.begin() + 14}) == "First Citizen:");

  spec.vocabulary = "bytes";
  spec.validation_fraction = 0.25;
  const fs::path file = temp_dir("text") / "t.txt";
  std::ofstream(file) << std::string(100, 'x');
  spec.path = file.string();
  spec.seq_len = 8;
  const Splits b = read_text_splits(spec);
  CHECK(b.train.vocabulary->size() == 256);
  CHECK(b.train.tokens.size() == 75);
  CHECK(b.test.tokens.size() == 25);
  CHECK(b.test.tokens[0] == 'x');

  spec.validation_fraction = 0;  // no validation split: empty, and the loader says so
  const Splits none = read_text_splits(spec);
  CHECK(none.test.size() == 0);
  CHECK_THROWS_WITH_AS(Loader(none.test, LoaderSpec{}), doctest::Contains("no validation split"), UserError);

  spec.validation_fraction = 0.1;
  spec.seq_len = 10;  // the validation split holds 10 tokens, one short of a window
  CHECK_THROWS_WITH_AS(read_text_splits(spec), doctest::Contains("too short for seq_len = 10: 10 tokens"), UserError);
  std::ofstream(file) << "ok\xFF";
  spec.vocabulary = "characters";
  CHECK_THROWS_WITH_AS(read_text_splits(spec), doctest::Contains("t.txt: invalid UTF-8 at byte offset 2"), UserError);
  spec.path = "no_such_text.txt";
  CHECK_THROWS_WITH_AS(read_text_splits(spec), doctest::Contains("no_such_text.txt: not found (data.path); a relative"),
                       UserError);
}

// A byte-level BPE tokenizer.json of the 256 byte characters and <|endoftext|> (id 256),
// no merges: each byte one token, whose id is the byte's place in GPT-2's byte table.
std::string byte_tokenizer_json() {
  std::string vocab;
  int id = 0;
  auto add = [&](char32_t c) {
    std::string utf8;
    if (c < 0x80) {
      utf8 = (c == '"' || c == '\\') ? std::string("\\") + static_cast<char>(c) : std::string(1, static_cast<char>(c));
    } else {
      utf8 += static_cast<char>(0xC0 | (c >> 6));
      utf8 += static_cast<char>(0x80 | (c & 0x3F));
    }
    vocab += fmt::format("{}\"{}\": {}", id ? ", " : "", utf8, id);
    ++id;
  };
  for (char32_t b = 0; b < 256; ++b) {  // GPT-2's bytes_to_unicode
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    if (printable) add(b);
  }
  for (char32_t b = 0, n = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    if (!printable) add(256 + n++);
  }
  return fmt::format(R"({{"added_tokens": [{{"id": 256, "content": "<|endoftext|>", "special": true}}],
    "pre_tokenizer": {{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}},
    "model": {{"type": "BPE", "vocab": {{{}, "<|endoftext|>": 256}}, "merges": []}}}})", vocab);
}

TEST_CASE("text data: a folder or a pattern of files, documents apart by end-of-text, cached in the folder") {
  const fs::path dir = temp_dir("text_documents");
  fs::create_directories(dir / "b");
  std::ofstream(dir / "a.txt") << std::string(40, 'a');
  std::ofstream(dir / "b" / "c.txt") << std::string(40, 'c');
  std::ofstream(dir / ".hidden.txt") << "hidden";
  std::ofstream(dir / ".tokenizer.json") << byte_tokenizer_json();  // hidden: no document
  DataSpec spec;
  spec.dataset = "text";
  spec.seq_len = 8;
  spec.validation_fraction = 0.25;
  SUBCASE("characters: the files one after another, in path order, hidden files left out") {
    spec.path = dir.string();
    const Splits s = read_text_splits(spec);
    CHECK(s.train.vocabulary->size() == 2);
    CHECK(s.train.tokens.size() + s.test.tokens.size() == 80);
    CHECK(s.train.vocabulary->decode({s.train.tokens.begin() + 39, s.train.tokens.begin() + 41}) == "ac");
  }
  SUBCASE("a tokenizer: <|endoftext|> between documents; the ids cached in the folder and read back") {
    spec.tokenizer = (dir / ".tokenizer.json").string();
    spec.path = (dir / "*" / "*.txt").string();  // b/c.txt alone
    const Splits c = read_text_splits(spec);
    CHECK(c.train.tokens.size() + c.test.tokens.size() == 40);
    spec.path = dir.string();  // a.txt, b/c.txt
    const Splits s = read_text_splits(spec);
    std::vector<int32_t> all = s.train.tokens;
    all.insert(all.end(), s.test.tokens.begin(), s.test.tokens.end());
    REQUIRE(all.size() == 81);
    CHECK(all[40] == 256);
    CHECK(s.train.vocabulary->decode({all.begin() + 39, all.begin() + 42}) == "a<|endoftext|>c");
    int caches = 0;
    for (const auto& e : fs::directory_iterator(dir)) caches += e.path().filename().string().starts_with(".distrain.");
    CHECK(caches == 2);  // the folder's and the pattern's (the same folder before its wildcard)
    const Splits again = read_text_splits(spec);  // from the cache
    CHECK(again.train.tokens == s.train.tokens);
  }
  SUBCASE("a pattern that matches nothing, an empty folder") {
    spec.path = (dir / "*.md").string();
    CHECK_THROWS_WITH_AS(read_text_splits(spec), doctest::Contains("*.md: the pattern matches no file (data.path)"), UserError);
    fs::create_directories(dir / "empty");
    spec.path = (dir / "empty").string();
    CHECK_THROWS_WITH_AS(read_text_splits(spec), doctest::Contains("empty: the folder holds no text files"), UserError);
  }
}

TEST_CASE("token loader: labels are the inputs shifted by one token") {
  const Dataset d = counting_split(103, 10);
  CHECK(d.size() == 10);  // (103 - 1) / 10 windows
  CHECK(d.examples() == 10);
  for (const bool shuffle : {false, true}) {
    Loader loader(d, LoaderSpec{3, 2, shuffle, false, 7});
    loader.start(0);
    int64_t windows = 0;
    while (auto b = loader.next()) {
      for (const ReplicaSlice& s : b->replicas) {
        REQUIRE(s.tokens.size() == static_cast<size_t>(s.count * 10));
        REQUIRE(s.labels.size() == s.tokens.size());
        CHECK(s.images.empty());
        for (size_t i = 0; i < s.tokens.size(); ++i) CHECK(s.labels[i] == s.tokens[i] + 1);
        for (int64_t w = 0; w < s.count; ++w)  // a window is consecutive tokens
          CHECK(s.tokens[static_cast<size_t>(w * 10 + 9)] == s.tokens[static_cast<size_t>(w * 10)] + 9);
        windows += s.count;
      }
    }
    CHECK(windows == 10);
  }
}

TEST_CASE("token loader: shuffled offsets depend only on (seed, epoch), resume reproduces them") {
  const Dataset d = counting_split(1000, 16);
  const LoaderSpec spec{4, 2, true, false, 42};
  const std::vector<int32_t> epoch3 = window_starts(d, spec, 3);
  REQUIRE(epoch3.size() == 62);  // 999 / 16
  CHECK(window_starts(d, spec, 3) == epoch3);
  CHECK(window_starts(d, spec, 4) != epoch3);
  LoaderSpec other_seed = spec;
  other_seed.seed = 43;
  CHECK(window_starts(d, other_seed, 3) != epoch3);
  // Resumed at batch 5 (8 windows a batch): the same windows from there on.
  CHECK(window_starts(d, spec, 3, 5) == std::vector<int32_t>(epoch3.begin() + 40, epoch3.end()));
  // One replica's slices are those of the whole view.
  LoaderSpec second = spec;
  second.first_replica = 1, second.local_replicas = 1;
  const std::vector<int32_t> mine = window_starts(d, second, 3);
  CHECK(mine.front() == epoch3[4]);
  std::set<int32_t> distinct(epoch3.begin(), epoch3.end());
  CHECK(distinct.size() > 50);  // random offsets, not a fixed grid
  for (int32_t start : epoch3) CHECK((start >= 0 && start <= 1000 - 16 - 1));
}

TEST_CASE("token loader: without shuffle window k starts at k * window") {
  const Dataset d = counting_split(100, 7);
  const std::vector<int32_t> starts = window_starts(d, LoaderSpec{5, 1, false, false, 1}, 2);
  REQUIRE(starts.size() == 14);
  for (size_t k = 0; k < starts.size(); ++k) CHECK(starts[k] == static_cast<int32_t>(k * 7));
}

TEST_CASE("token files: nanoGPT raw and llm.c files read, in a folder or named anywhere") {
  const fs::path dir = temp_dir("tokens");
  write_bytes(dir / "train.bin", raw_tokens(counting(50)));
  write_bytes(dir / "val.bin", llmc_tokens({50256, 1, 2, 3, 4, 5}));
  const Splits s = read_token_splits(tokens_spec(dir));
  CHECK(s.train.tokens.size() == 50);
  CHECK(s.train.tokens[49] == 49);
  CHECK(s.test.tokens == std::vector<int32_t>{50256, 1, 2, 3, 4, 5});
  CHECK(s.train.num_classes == 50257);
  CHECK(s.train.vocabulary->to_text() == "gpt2:50257");
  CHECK(s.train.window == 4);
  CHECK(s.test.size() == 1);

  const fs::path other = temp_dir("tokens_elsewhere");
  write_bytes(other / "fineweb_train_000001.bin", llmc_tokens(counting(20)));
  DataSpec spec = tokens_spec(dir);
  spec.train_file = (other / "fineweb_train_000001.bin").string();  // absolute: as it is
  spec.val_file = "train.bin";                                      // relative: inside data.path
  const Splits named = read_token_splits(spec);
  CHECK(named.train.tokens.size() == 20);
  CHECK(named.test.tokens.size() == 50);
}

TEST_CASE("token files: bad files are one-line errors naming the file") {
  const std::string f = "f.bin";
  auto parse = [&](const std::vector<uint8_t>& bytes, int64_t vocab = 50257) { return parse_token_file(bytes, vocab, f); };
  CHECK_THROWS_WITH_AS(parse(llmc_tokens(counting(8), 20240520, 2)),
                       doctest::Contains("f.bin: starts with llm.c's magic 20240520, but its header's version is 2"), UserError);
  // A raw file whose first two ids spell the magic: the hint, and data.token_format = "raw" reads it.
  const std::vector<uint16_t> spelling{20240520 & 0xffff, 20240520 >> 16, 7, 9};
  CHECK_THROWS_WITH_AS(parse(raw_tokens(spelling), 65536), doctest::Contains("set data.token_format = \"raw\""), UserError);
  CHECK(parse_token_file(raw_tokens(spelling), 65536, f, "raw") == std::vector<int32_t>(spelling.begin(), spelling.end()));
  CHECK_THROWS_WITH_AS(parse_token_file(raw_tokens(counting(8)), 50257, f, "llmc"), doctest::Contains("no llm.c header"), UserError);
  CHECK(parse_token_file(llmc_tokens(counting(8)), 50257, f, "llmc").size() == 8);
  CHECK_THROWS_WITH_AS(parse(llmc_tokens(counting(8), 20240521)), doctest::Contains("with magic 20240521, expected 20240520"),
                       UserError);
  CHECK_THROWS_WITH_AS(parse(llmc_tokens(counting(8), 20240801, 7)), doctest::Contains("LLaMA 3"), UserError);
  CHECK_THROWS_WITH_AS(parse(llmc_tokens(counting(8), 20240520, 1, 9)),
                       doctest::Contains("f.bin: the header says 9 tokens but 16 bytes follow it (8 tokens) (truncated?)"),
                       UserError);
  std::vector<uint8_t> odd = raw_tokens(counting(8));
  odd.pop_back();
  CHECK_THROWS_WITH_AS(parse(odd), doctest::Contains("f.bin: 15 bytes, an odd length"), UserError);
  std::vector<uint8_t> short_header = llmc_tokens({});
  short_header.resize(100);
  CHECK_THROWS_WITH_AS(parse(short_header), doctest::Contains("fewer than its 1024-byte header"), UserError);
  CHECK_THROWS_WITH_AS(parse(raw_tokens({1, 2, 300, 4}), 256),
                       doctest::Contains("f.bin: token 300 at position 2 is not below data.vocab_size = 256"), UserError);
  CHECK_THROWS_WITH_AS(parse(llmc_tokens({1, 2, 3, 50257})), doctest::Contains("token 50257 at position 3"), UserError);

  const fs::path dir = temp_dir("tokens_bad");
  write_bytes(dir / "train.bin", raw_tokens(counting(50)));
  CHECK_THROWS_WITH_AS(read_token_splits(tokens_spec(dir)),
                       doctest::Contains(((dir / "val.bin").string() + ": not found (data.path, data.val_file)").c_str()), UserError);
  write_bytes(dir / "val.bin", raw_tokens(counting(64)));
  CHECK_THROWS_WITH_AS(read_token_splits(tokens_spec(dir, 64)),
                       doctest::Contains(((dir / "train.bin").string() + ": too short for seq_len = 64: 50 tokens").c_str()), UserError);
  DataSpec relative = tokens_spec("no_such_folder");
  CHECK_THROWS_WITH_AS(read_token_splits(relative), doctest::Contains("a relative data.path is taken from the current folder"),
                       UserError);
}

TEST_CASE("recipe: text and tokens keys are read, image keys and device placement refused") {
  auto recipe = [](const std::string& data) {
    return parse_recipe("[data]\n" + data + "\n[model]\ninput_shape = [8]\nlayers = [{ type = \"dense\", units = 65 }]\n",
                        "lm.toml");
  };
  const Recipe r = recipe("dataset = \"text\"\npath = \"data/tiny_shakespeare.txt\"\nseq_len = 8\nvocabulary = \"bytes\"");
  CHECK(r.data.seq_len == 8);
  CHECK(r.data.vocabulary == "bytes");
  CHECK(r.data.validation_fraction == 0.1);
  const Recipe t = recipe("dataset = \"tokens\"\npath = \"fw\"\nseq_len = 8\ntrain_file = \"a_train.bin\"\nvocab_size = 512");
  CHECK(t.data.train_file == "a_train.bin");
  CHECK(t.data.val_file == "val.bin");
  CHECK(t.data.vocab_size == 512);
  CHECK_THROWS_WITH_AS(recipe("dataset = \"text\"\npath = \"x.txt\""), doctest::Contains("data.seq_len: missing"), UserError);
  CHECK_THROWS_WITH_AS(recipe("dataset = \"text\"\nseq_len = 8"), doctest::Contains("data.path: required"), UserError);
  CHECK_THROWS_WITH_AS(recipe("dataset = \"text\"\npath = \"x.txt\"\nseq_len = 8\nimage_shape = [8, 1, 1]"),
                       doctest::Contains("data.image_shape: unknown key"), UserError);
  CHECK_THROWS_WITH_AS(recipe("dataset = \"text\"\npath = \"x.txt\"\nseq_len = 8\nvalidation_fraction = 0.6"),
                       doctest::Contains("data.validation_fraction: must be in [0, 0.5]"), UserError);
  CHECK_THROWS_WITH_AS(recipe("dataset = \"text\"\npath = \"x.txt\"\nseq_len = 8\nvocab_size = 100"),
                       doctest::Contains("data.vocab_size: unknown key"), UserError);
  CHECK_THROWS_WITH_AS(recipe("dataset = \"tokens\"\npath = \"fw\"\nseq_len = 8\nvocab_size = 70000"),
                       doctest::Contains("data.vocab_size: must be in [2, 65536]"), UserError);
  CHECK_THROWS_WITH_AS(recipe("dataset = \"tokens\"\nseq_len = 8\ntrain_file = \"a.bin\""), doctest::Contains("data.path: required"),
                       UserError);
  CHECK_THROWS_WITH_AS(recipe("dataset = \"tokens\"\npath = \"fw\"\nseq_len = 8\nplacement = \"device\""),
                       doctest::Contains("data.placement: \"device\" is not available for token data"), UserError);
}

TEST_CASE("data placement: token data stays on the host, \"device\" is refused by name") {
  Recipe recipe = parse_recipe("[data]\ndataset = \"synthetic\"\nimage_shape = [8, 1, 1]\n[model]\ninput_shape = [8, 1, 1]\n"
                               "layers = [{ type = \"flatten\" }, { type = \"dense\", units = 10 }]\n"
                               "[strategy]\ndevices = [\"cpu:0\"]\n",
                               "lm.toml");
  const auto strategy = make_strategy(recipe);
  const Dataset tokens = counting_split(100, 8);
  recipe.data.dataset = "text";
  recipe.data.placement = "auto";
  CHECK_FALSE(place_data_on_devices(recipe, *strategy, tokens, DataUse::training));
  recipe.data.placement = "device";
  CHECK_THROWS_WITH_AS(place_data_on_devices(recipe, *strategy, tokens, DataUse::training),
                       doctest::Contains("lm.toml: data.placement = \"device\" is not available for token data"), UserError);
}

}  // namespace distrain::test

namespace distrain::test {

// A layer sized "vocabulary" takes the token data's size, stored as the number; image data
// has no vocabulary to give.
TEST_CASE("token data: input_dim and units = \"vocabulary\" say the vocabulary's size once") {
  const std::string recipe = std::string(DISTRAIN_SOURCE_DIR) + "/recipes/shakespeare_char_gpt.toml";
  const Recipe characters = load_recipe(recipe, {"data.path=\"" + kShakespeare + "\""});
  CHECK((*characters.table)["model"]["layers"][0]["input_dim"].value<int64_t>() == 65);
  CHECK((*characters.table)["model"]["layers"][4]["units"].value<int64_t>() == 65);
  const Recipe bytes = load_recipe(recipe, {"data.path=\"" + kShakespeare + "\"", "data.vocabulary=\"bytes\""});
  CHECK((*bytes.table)["model"]["layers"][4]["units"].value<int64_t>() == 256);
  // A checkpoint's copy of the recipe holds the number, and is read without the data.
  CHECK(parse_recipe(bytes.resolved_text(), "stored", {"data.path=\"/nonexistent.txt\""}).model().layers.size() ==
        bytes.model().layers.size());
  CHECK_THROWS_WITH_AS(load_recipe(std::string(DISTRAIN_SOURCE_DIR) + "/recipes/fashion_mnist_cnn.toml",
                                   {"model.layers.6.units=\"vocabulary\""}),
                       doctest::Contains("sizes a layer by \"vocabulary\", the token data's vocabulary size, and "
                                         "data.dataset = \"fashion_mnist\" has none"),
                       UserError);
  // Sizes written as numbers that the data outgrows: every one named, in one line.
  DataSpec text;
  text.dataset = "text";
  text.path = kShakespeare;
  text.seq_len = 64;
  const Splits data = read_text_splits(text);
  const Recipe small = load_recipe(recipe, {"data.path=\"" + kShakespeare + "\"", "model.layers.0.input_dim=60", "model.layers.4.units=60"});
  CHECK_THROWS_WITH_AS(check_data_fits(small, data.train),
                       doctest::Contains("model.layers[0].input_dim = 60 and model.layers[4].units = 60 but the data has 65 "
                                         "tokens in its vocabulary"),
                       UserError);
  const Recipe table = load_recipe(std::string(DISTRAIN_SOURCE_DIR) + "/recipes/llama_shakespeare.toml",  // untied
                                   {"data.path=\"" + kShakespeare + "\"", "model.layers.0.input_dim=60"});
  CHECK_THROWS_WITH_AS(check_data_fits(table, data.train), doctest::Contains("model.layers[0].input_dim = 60 but"), UserError);
}

}  // namespace distrain::test
