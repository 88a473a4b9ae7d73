// What each fuzz target does with one input, shared by the libFuzzer targets
// (fuzz_*.cpp) and the unit test that replays every input a fuzzer ever crashed on
// (tests/fuzz/regressions/<target>/, tests/unit/test_bad_input.cpp). Bad input must end
// in a UserError, which is caught here; anything else (a crash, a sanitizer report,
// another exception) is a finding.
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/base/error.hpp"
#include "core/base/h5_id.hpp"
#include "core/base/json.hpp"
#include "core/io/checkpoint.hpp"
#include "core/io/hf_model.hpp"
#include "core/io/safetensors.hpp"
#include "core/io/recipe.hpp"
#include "core/model/model.hpp"
#include "core/strategy/strategy.hpp"
#include "datasets/idx.hpp"
#include "datasets/image_file.hpp"
#include "datasets/bpe_tokenizer.hpp"
#include "datasets/sentencepiece_tokenizer.hpp"
#include "datasets/npy.hpp"
#include "datasets/utf8.hpp"

namespace distrain::fuzz {

// fuzz_recipe: the input is recipe text; lines after a line "#--set" are KEY=VALUE
// overrides, as `distrain train RECIPE --set ...` applies them.
inline void recipe_input(std::span<const uint8_t> data) {
  const std::string input(data.begin(), data.end());
  static const std::string kMarker = "\n#--set\n";
  const size_t at = input.find(kMarker);
  std::vector<std::string> overrides;
  for (size_t pos = at == std::string::npos ? input.size() + 1 : at + kMarker.size(); pos <= input.size();) {
    const size_t end = std::min(input.find('\n', pos), input.size());
    overrides.push_back(input.substr(pos, end - pos));
    pos = end + 1;
  }
  try {
    const Recipe r = parse_recipe(input.substr(0, at), "fuzz.toml", overrides);
    (void)r.resolved_text();
  } catch (const UserError&) {
  }
}

// fuzz_idx: a 4-byte little-endian length L, L bytes of an IDX image file, then the label
// file (L clamped to what is there).
inline void idx_input(std::span<const uint8_t> data) {
  if (data.size() < 4) return;
  const size_t len = std::min<size_t>(
      uint32_t{data[0]} | uint32_t{data[1]} << 8 | uint32_t{data[2]} << 16 | uint32_t{data[3]} << 24, data.size() - 4);
  try {
    (void)parse_idx(data.subspan(4, len), data.subspan(4 + len), "fuzz-images", "fuzz-labels");
  } catch (const UserError&) {
  }
}

// fuzz_images: byte 0 picks the reader (0 PNG, 1 JPEG, 2 NPY), byte 1 the channels asked
// for (even: grey, odd: RGB); the rest is the file, written where the readers take it from
// (a path, as an image folder's files and predict's --data are read).
inline void image_input(std::span<const uint8_t> data) {
  if (data.size() < 2) return;
  static const std::string dir = [] {
    std::string d = "/tmp/distrain_fuzz_images.XXXXXX";
    return std::string(mkdtemp(d.data()) ? d : "/tmp");
  }();
  static const char* kExtensions[] = {".png", ".jpg", ".npy"};
  const int kind = data[0] % 3;
  const std::string path = dir + "/input" + kExtensions[kind];
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
    if (!f) return;
    std::fwrite(data.data() + 2, 1, data.size() - 2, f.get());
  }
  try {
    if (kind == 2) {
      (void)read_npy_examples(path, Shape{8, 8, 1});
    } else {
      std::vector<uint8_t> pixels;
      read_image_file(path, Shape{8, 8, data[1] % 2 ? 3 : 1}, pixels);
    }
  } catch (const UserError&) {
  }
}

// fuzz_safetensors: the input is a model.safetensors beside a fixed config.json of a tiny
// Llama (vocabulary 8, width 4, 2 query heads over 1 key/value head, one block, untied
// head): the file's header and every tensor read (SafetensorsFile), then the folder
// imported (read_hf_model), as `distrain import` reads a Hugging Face folder.
inline void safetensors_input(std::span<const uint8_t> data) {
  static const std::string dir = [] {
    std::string d = "/tmp/distrain_fuzz_safetensors.XXXXXX";
    const std::string made = mkdtemp(d.data()) ? d : "/tmp/distrain_fuzz_safetensors";
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen((made + "/config.json").c_str(), "wb"), std::fclose);
    if (f)
      std::fputs(R"({"model_type": "llama", "vocab_size": 8, "hidden_size": 4, "intermediate_size": 4,
        "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 2,
        "max_position_embeddings": 8, "rms_norm_eps": 1e-6, "tie_word_embeddings": false})",
                 f.get());
    return made;
  }();
  const std::string path = dir + "/model.safetensors";
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
    if (!f) return;
    std::fwrite(data.data(), 1, data.size(), f.get());
  }
  try {
    const SafetensorsFile file(path);
    for (const auto& [name, entry] : file.entries()) (void)file.floats(name);
    (void)read_hf_model(dir, 4);
  } catch (const UserError&) {
  }
}

// fuzz_checkpoint: what distrain's checkpoint reader does with any well-formed HDF5 file.
// The input is a list of operations that write attributes (any name the reader looks for,
// as int64, double, string or arrays of them) and datasets (any shape and element type,
// at the model's paths or beside them) into a new file with HDF5 itself; then
// read_checkpoint_header (and the stored recipe through parse_recipe, as `eval` does) and
// load_weights into the small model of kCheckpointRecipe read it.
// Byte-level corruption of the HDF5 format is HDF5's own parser's domain: its heap
// overflows on corrupt object headers (found with checkpoint_file_input) are HDF5 bugs
// that distrain cannot fix; fuzz_checkpoint_bytes exercises them, outside CI.
inline const char* kCheckpointRecipe = R"(
name = "fuzz"
[data]
dataset = "synthetic"
train_examples = 8
test_examples = 8
image_shape = [4, 4, 1]
[optimizer]
type = "sgd"
[train]
tensorboard = false
[model]
input_shape = [4, 4, 1]
layers = [
  { type = "conv2d", filters = 2, kernel_size = 3 },
  { type = "flatten" },
  { type = "dense", units = 3 },
]
)";

inline Model& checkpoint_model() {
  static const Recipe recipe = parse_recipe(kCheckpointRecipe, "fuzz.toml");
  static Model m(recipe.model(), backend_for(Device{DeviceType::cpu, 0}));
  return m;
}

inline void write_checkpoint_seed(const std::string& path) {
  const Recipe recipe = parse_recipe(kCheckpointRecipe, "fuzz.toml");
  auto strategy = make_strategy(recipe);
  strategy->model_state().initialize(1);
  save_checkpoint(path, strategy->model_state(), strategy->optimizer_state(), TrainState{3, 0, 3, {}, 0.5},
                  recipe.resolved_text());
}

// Reads the file at `path` as `eval` and a resumed `train` do; UserError is expected.
// DISTRAIN_FUZZ_VERBOSE=1 prints the UserErrors (to check what a seed reaches).
inline void expected_error(const UserError& e) {
  static const bool verbose = std::getenv("DISTRAIN_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "UserError: %s\n", e.what());
}

inline void read_checkpoint_file(const std::string& path) {
  try {  // each reader on its own: a header error must not hide what load_weights does
    const CheckpointHeader h = read_checkpoint_header(path);
    (void)parse_recipe(h.recipe, path);
  } catch (const UserError& e) {
    expected_error(e);
  }
  try {
    load_weights(path, checkpoint_model());
  } catch (const UserError& e) {
    expected_error(e);
  }
}

inline std::string fuzz_file_path() { return "/tmp/distrain-fuzz-ckpt-" + std::to_string(::getpid()) + ".h5"; }

// The input bytes as the file (fuzz_checkpoint_bytes and its regressions).
inline void checkpoint_file_input(std::span<const uint8_t> data) {
  const std::string path = fuzz_file_path();
  {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
    if (!f || std::fwrite(data.data(), 1, data.size(), f.get()) != data.size()) throw Error("cannot write " + path);
  }
  read_checkpoint_file(path);
  std::remove(path.c_str());
}

namespace detail {

struct Bytes {
  std::span<const uint8_t> d;
  uint8_t u8() {
    if (d.empty()) return 0;
    const uint8_t b = d[0];
    d = d.subspan(1);
    return b;
  }
  template <class T>
  T value() {
    T v{};
    uint8_t raw[sizeof(T)] = {};
    for (uint8_t& b : raw) b = u8();
    std::memcpy(&v, raw, sizeof(T));
    return v;
  }
  std::string text() {
    const size_t low = u8(), high = u8();  // in this order
    const size_t n = std::min(low | high << 8, d.size());
    std::string s(d.begin(), d.begin() + static_cast<long>(n));
    d = d.subspan(n);
    return s;
  }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[u8() % v.size()]; }
};

inline hid_t open_or_create_group(hid_t parent, const std::string& name) {
  if (H5Lexists(parent, name.c_str(), H5P_DEFAULT) > 0) return H5Gopen2(parent, name.c_str(), H5P_DEFAULT);
  return H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
}

// An attribute `name` on obj: int64, double or fixed string, scalar or an array of 1..4.
inline void write_attribute(hid_t obj, const std::string& name, Bytes& in) {
  H5Adelete(obj, name.c_str());
  const uint8_t kind = in.u8();
  const hsize_t n = 1 + kind / 8 % 4;
  H5Id space(kind & 4 ? H5Screate_simple(1, &n, nullptr) : H5Screate(H5S_SCALAR), H5Sclose);
  const hsize_t count = kind & 4 ? n : 1;
  switch (kind % 3) {
    case 0: {
      std::vector<int64_t> v(count);
      for (auto& x : v) x = in.value<int64_t>();
      H5Id a(H5Acreate2(obj, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      if (a.ok()) H5Awrite(a, H5T_NATIVE_INT64, v.data());
      break;
    }
    case 1: {
      std::vector<double> v(count);
      for (auto& x : v) x = in.value<double>();
      H5Id a(H5Acreate2(obj, name.c_str(), H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      if (a.ok()) H5Awrite(a, H5T_NATIVE_DOUBLE, v.data());
      break;
    }
    default: {
      const std::string t = in.text();
      const size_t size = std::max<size_t>(t.size(), 1);
      std::string all;
      for (hsize_t i = 0; i < count; ++i) all += t.empty() ? std::string(1, '\0') : t;
      H5Id type(H5Tcopy(H5T_C_S1), H5Tclose);
      H5Tset_size(type, size);
      H5Tset_strpad(type, in.u8() & 1 ? H5T_STR_NULLPAD : H5T_STR_NULLTERM);
      H5Id a(H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      if (a.ok()) H5Awrite(a, type, all.data());
    }
  }
}

// A dataset at /model/<layer>/<name>: rank 0..4, extents 0..15, float32, float64 or int32.
inline void write_dataset(hid_t file, Bytes& in) {
  static const std::vector<std::string> layers{"conv2d_1", "dense_1", "flatten_1", "x"};
  static const std::vector<std::string> names{"kernel", "bias", "moving_mean"};
  H5Id model(open_or_create_group(file, "model"), H5Gclose);
  H5Id layer(open_or_create_group(model, in.pick(layers)), H5Gclose);
  const std::string name = in.pick(names);
  H5Ldelete(layer, name.c_str(), H5P_DEFAULT);
  const int rank = in.u8() % 5;
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  hsize_t count = 1;
  for (hsize_t& x : dims) count *= (x = in.u8() % 16);
  static const std::vector<hid_t> types{H5T_IEEE_F32LE, H5T_IEEE_F64LE, H5T_STD_I32LE};
  const hid_t type = in.pick(types);
  H5Id space(rank ? H5Screate_simple(rank, dims.data(), nullptr) : H5Screate(H5S_SCALAR), H5Sclose);
  H5Id ds(H5Dcreate2(layer, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  std::vector<float> values(count);
  for (float& v : values) v = in.value<float>();
  if (ds.ok() && count > 0) H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
}

}  // namespace detail

// The structured input: a sequence of operations, written with HDF5 and then read.
inline void checkpoint_input(std::span<const uint8_t> data) {
  static const std::vector<std::string> root_attrs{"format", "format_version", "step", "epoch", "recipe",
                                                   "distrain_version"};
  static const std::vector<std::string> state_attrs{"epoch",         "batch_in_epoch", "epoch_loss_sum",
                                                    "epoch_correct", "epoch_count",    "epoch_seconds"};
  quiet_hdf5();
  const std::string path = fuzz_file_path();
  {
    H5Id f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    if (!f.ok()) throw Error("cannot create " + path);
    detail::Bytes in{data};
    for (int op = 0; !in.d.empty() && op < 64; ++op) {
      switch (in.u8() % 3) {
        case 0: detail::write_attribute(f, in.pick(root_attrs), in); break;
        case 1: {
          H5Id g(detail::open_or_create_group(f, "state"), H5Gclose);
          detail::write_attribute(g, in.pick(state_attrs), in);
          break;
        }
        default: detail::write_dataset(f, in);
      }
    }
  }
  read_checkpoint_file(path);
  if (!std::getenv("DISTRAIN_FUZZ_KEEP")) std::remove(path.c_str());
}


// GPT-2's character for byte b (its published byte-to-unicode table, written out here).
inline std::string byte_level_char(int b) {
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  char32_t c = static_cast<char32_t>(b);
  if (!printable) c = 256 + static_cast<char32_t>(b <= 32 ? b : b <= 160 ? b - 127 + 33 : 33 + 34);
  std::string out;
  append_utf8(out, c);
  return out;
}

// A small byte-level BPE tokenizer.json: the 256 byte tokens, "th", "the", " the", and
// <|endoftext|> as 300.
inline std::string small_bpe_json() {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_level_char(b)] = b;
  vocab["th"] = 256, vocab["the"] = 257, vocab["\xc4\xa0the"] = 258;
  return Json{{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"t h", "th e", "\xc4\xa0 the"}}}},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
              {"added_tokens", Json::array({{{"id", 300}, {"content", "<|endoftext|>"}, {"special", true}}})}}
      .dump();
}

// fuzz_tokenizer: byte 0 even: the rest is a tokenizer.json, and what it makes of a fixed
// text; odd: the rest is text for small_bpe_json's tokenizer, whose decoding must give the
// text back wherever it is UTF-8.
inline void tokenizer_input(std::span<const uint8_t> data) {
  if (data.empty()) return;
  const std::string rest(reinterpret_cast<const char*>(data.data()) + 1, data.size() - 1);
  try {
    if (data[0] % 2 == 0) {
      const auto t = parse_bpe_tokenizer(rest, "fuzz.json");
      (void)t->decode(t->encode("the quick <|endoftext|> fox  \n\n 42 \xe4\xb8\x96"));
      return;
    }
    static const auto small = parse_bpe_tokenizer(small_bpe_json(), "small.json");
    if (small->decode(small->encode(rest)) != rest) std::abort();
  } catch (const UserError&) {
  }
}

// A SentencePiece .model's bytes: read, then a varied text encoded and decoded with it.
inline void sentencepiece_input(std::span<const uint8_t> data) {
  try {
    const auto t = parse_sentencepiece_model(std::string(reinterpret_cast<const char*>(data.data()), data.size()), "fuzz.model");
    (void)t->decode(t->encode("the quick </s> fox  \n\n 42 \xe4\xb8\x96 \xf0\x9f\x98\x80"));
  } catch (const UserError&) {
  }
}

}  // namespace distrain::fuzz
