// safetensors files written and read here (no Python needed): float32, bfloat16 and float16
// values kept exactly, every float16 bit pattern through float32 and back, half rounding
// to nearest even, and the files refused before a byte is trusted; a Hugging Face folder
// with a config.json checked key by key. (tests/e2e/hf_test.sh holds distrain against
// transformers itself.)
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/base/error.hpp"
#include "core/base/json.hpp"
#include "core/io/hf_model.hpp"
#include "core/io/safetensors.hpp"

using namespace distrain;

namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("distrain_st_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<uint8_t> file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A file of one header (as given) and `data`.
void write_raw(const fs::path& p, const std::string& header, const std::vector<uint8_t>& data) {
  std::ofstream out(p, std::ios::binary);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(n >> (8 * i)));
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

uint16_t half_of(float f) {
  const std::vector<uint8_t> b = st_bytes({f}, StDType::f16);
  return static_cast<uint16_t>(b[0] | b[1] << 8);
}

}  // namespace

TEST_CASE("safetensors: float32, bfloat16 and float16 tensors written and read back exactly, in name order") {
  const fs::path dir = temp_dir("roundtrip");
  const std::vector<float> values{0.0f, -1.5f, 3.25f, 1e-3f, -65504.0f, 0.099609375f};
  std::vector<StTensor> tensors;
  for (const StDType t : {StDType::f32, StDType::bf16, StDType::f16})
    tensors.push_back({std::string("w_") + st_dtype_name(t), t, Shape{2, 3}, st_bytes(values, t)});
  write_safetensors((dir / "m.safetensors").string(), tensors, {{"format", "pt"}});
  const SafetensorsFile f((dir / "m.safetensors").string());
  REQUIRE(f.entries().size() == 3);
  CHECK(f.entries().begin()->first == "w_BF16");  // stored by name
  CHECK(f.floats("w_F32") == values);
  const std::vector<float> bf = f.floats("w_BF16"), half = f.floats("w_F16");
  for (size_t i = 0; i < values.size(); ++i) {
    CHECK(bf[i] == doctest::Approx(values[i]).epsilon(1.0 / 256));
    CHECK(half[i] == doctest::Approx(values[i]).epsilon(1.0 / 2048));
  }
  CHECK(f.entry("w_F16").shape == Shape{2, 3});
  CHECK(st_bytes(half, StDType::f16) == f.bytes("w_F16"));  // narrowed back: the same bits
  CHECK(st_bytes(bf, StDType::bf16) == f.bytes("w_BF16"));
  const std::vector<uint8_t> raw = file_bytes(dir / "m.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | raw[static_cast<size_t>(i)];
  CHECK(n % 8 == 0);  // the header padded to 8 bytes, as the library writes it
}

TEST_CASE("safetensors: every float16 bit pattern survives float32 and back, rounding to nearest even") {
  std::vector<uint8_t> all(2 * 65536);
  for (uint32_t h = 0; h < 65536; ++h) {
    all[2 * h] = static_cast<uint8_t>(h);
    all[2 * h + 1] = static_cast<uint8_t>(h >> 8);
  }
  const fs::path dir = temp_dir("half");
  write_safetensors((dir / "h.safetensors").string(), {{"h", StDType::f16, Shape{65536}, all}}, {});
  const std::vector<float> f = SafetensorsFile((dir / "h.safetensors").string()).floats("h");
  int nan = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    if (std::isnan(f[h])) {
      ++nan;
      continue;
    }
    INFO("half bits " << h);
    CHECK(half_of(f[h]) == h);
  }
  CHECK(nan == 2 * 1023);
  CHECK(f[0x3c00] == 1.0f);
  CHECK(f[0x0001] == std::ldexp(1.0f, -24));
  CHECK(f[0x7bff] == 65504.0f);
  CHECK(half_of(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // a tie: to the even neighbour
  CHECK(half_of(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // a tie: to the even neighbour, up
  CHECK(half_of(65520.0f) == 0x7c00);                          // past the largest: infinity
  CHECK(half_of(std::ldexp(1.0f, -25)) == 0x0000);             // half the smallest subnormal: to zero (even)
  CHECK(half_of(std::ldexp(3.0f, -26)) == 0x0001);
}

TEST_CASE("safetensors: a file whose header lies is refused naming the file and the tensor") {
  const fs::path dir = temp_dir("bad");
  const fs::path p = dir / "bad.safetensors";
  const std::vector<uint8_t> data(16, 0);
  const auto refused = [&](const std::string& header, const std::string& message) {
    write_raw(p, header, data);
    CHECK_THROWS_WITH_AS(SafetensorsFile(p.string()), doctest::Contains(message.c_str()), UserError);
  };
  refused(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 12]}})", "tensor 'a' claims 12 bytes for 2 F32 values");
  refused(R"({"a": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})", "tensor 'a' claims bytes [0, 32) of 16");
  refused(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})", "claims bytes [8, 0)");
  refused(R"({"a": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]}})", "tensor 'a' is I64; distrain reads F32, BF16 and F16");
  refused(R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", "tensor 'a' has a bad shape");
  refused(R"({"a": {"dtype": "F32", "shape": [2]}})", "tensor 'a' lacks dtype, shape or data_offsets");
  refused(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
          "two tensors claim the same bytes");
  refused("[1, 2]", "its header is not a JSON object");
  refused("{not json", "its header is not a JSON object");
  {
    std::ofstream out(p, std::ios::binary);
    out << "\xff\xff\xff\xff\xff\xff\xff\x7f{}";
  }
  CHECK_THROWS_WITH_AS(SafetensorsFile(p.string()), doctest::Contains("a header of"), UserError);
  {
    std::ofstream out(p, std::ios::binary);
    out << "abc";
  }
  CHECK_THROWS_WITH_AS(SafetensorsFile(p.string()), doctest::Contains("shorter than its 8-byte header length"), UserError);
}

TEST_CASE("hf import: config.json keys that change the function and tensors out of place are one line naming them") {
  const fs::path dir = temp_dir("hf");
  Json config = {{"model_type", "llama"},         {"vocab_size", 8},          {"hidden_size", 4},
                 {"intermediate_size", 4},        {"num_hidden_layers", 1},   {"num_attention_heads", 2},
                 {"num_key_value_heads", 1},      {"max_position_embeddings", 8}};
  const auto write_config = [&](const Json& c) { std::ofstream(dir / "config.json") << c.dump(); };
  write_config(config);
  CHECK_THROWS_WITH_AS(read_hf_model(dir.string(), 4), doctest::Contains("neither model.safetensors"), UserError);
  // The tensors of the config's shapes, all zeros but their names.
  const auto tensor = [](const std::string& name, const Shape& s) {
    return StTensor{name, StDType::f32, s, st_bytes(std::vector<float>(static_cast<size_t>(s.numel()), 0.5f), StDType::f32)};
  };
  std::vector<StTensor> t{tensor("model.embed_tokens.weight", Shape{8, 4}),
                          tensor("model.layers.0.input_layernorm.weight", Shape{4}),
                          tensor("model.layers.0.post_attention_layernorm.weight", Shape{4}),
                          tensor("model.layers.0.self_attn.q_proj.weight", Shape{4, 4}),
                          tensor("model.layers.0.self_attn.k_proj.weight", Shape{2, 4}),
                          tensor("model.layers.0.self_attn.v_proj.weight", Shape{2, 4}),
                          tensor("model.layers.0.self_attn.o_proj.weight", Shape{4, 4}),
                          tensor("model.layers.0.mlp.gate_proj.weight", Shape{4, 4}),
                          tensor("model.layers.0.mlp.up_proj.weight", Shape{4, 4}),
                          tensor("model.layers.0.mlp.down_proj.weight", Shape{4, 4}),
                          tensor("model.norm.weight", Shape{4}),
                          tensor("lm_head.weight", Shape{8, 4})};
  write_safetensors((dir / "model.safetensors").string(), t, {});
  const HfImport m = read_hf_model(dir.string(), 4);
  CHECK(m.architecture == "llama");
  CHECK(m.tensors == 12);
  CHECK(m.model_toml.find("kv_heads = 1") != std::string::npos);
  CHECK(m.values.at("layers.0.self_attn/qkv_kernel").size() == 4 * 8);
  // config.json with `change` applied.
  const auto refused = [&](const Json& change, const std::string& message) {
    Json c = config;
    c.update(change);
    write_config(c);
    CHECK_THROWS_WITH_AS(read_hf_model(dir.string(), 4), doctest::Contains(message.c_str()), UserError);
  };
  refused(Json({{"model_type", "gemma"}}), "model_type: \"gemma\": distrain imports gpt2, llama, mistral and qwen2");
  refused(Json({{"hidden_act", "relu"}}), "hidden_act: \"relu\"");
  refused(Json({{"num_key_value_heads", 3}}), "num_key_value_heads: 3 does not divide num_attention_heads = 2");
  refused(Json({{"head_dim", 4}}), "head_dim: 4");
  refused(Json({{"rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}}}), "rope_type \"yarn\"");
  refused(Json({{"vocab_size", 9}}), "tensor 'model.embed_tokens.weight' is (8, 4), config.json implies (9, 4)");
  refused(Json({{"hidden_size", "four"}}), "hidden_size: has the wrong type");
  refused(Json({{"tie_word_embeddings", true}}), "tensor 'lm_head.weight' has no place");
  refused(Json({{"num_hidden_layers", nullptr}}), "num_hidden_layers: missing");
}
