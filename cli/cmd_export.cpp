// distrain export --ckpt CKPT|RUN_DIR --out FILE [--format keras|onnx|hf] [--external-data] [--set KEY=VALUE]...:
// a checkpoint's model for other frameworks. FILE.keras (keras.models.load_model) or
// FILE.weights.h5 (model.load_weights into the same architecture) for Keras 3, FILE.onnx
// for ONNX runtimes, a folder for Hugging Face transformers (--format hf: config.json and
// model.safetensors, --dtype, sharded past --shard-mb); the format follows from the name
// unless --format says it.
#include <fmt/ranges.h>

#include <filesystem>

#include "cli/commands.hpp"
#include "cli/inference.hpp"
#include "core/io/export_keras.hpp"
#include "core/io/export_onnx.hpp"
#include "core/io/exported_model.hpp"
#include "core/io/hf_model.hpp"
#include "core/model/model.hpp"

namespace distrain::cli {

namespace {

struct ExportArgs {
  std::string ckpt, out, format, dtype = "float32";
  double shard_mb = 5000;
  bool external_data = false;
  std::vector<std::string> overrides;
};

std::string format_of(const ExportArgs& a) {
  if (!a.format.empty()) return a.format;
  if (a.out.ends_with(".keras") || a.out.ends_with(".weights.h5")) return "keras";
  if (a.out.ends_with(".onnx")) return "onnx";
  throw UserError(fmt::format("--out {}: name it FILE.keras, FILE.weights.h5 or FILE.onnx, or give --format keras|onnx|hf", a.out));
}

// The ONNX model's input as a user feeds it.
std::string onnx_input_text(const ExportedModel& model) {
  if (model.input_dtype != DType::i32) return fmt::format("(batch, {}) float32", fmt::join(model.input_shape.dims(), ", "));
  return fmt::format("(batch, sequence) int32 token ids, sequences of 1 to {}", model.longest_sequence());
}

// A Hugging Face folder: everything translated before the folder is made.
void export_hf(const ExportArgs& a) {
  DT_USER_CHECK(!std::filesystem::exists(a.out) || std::filesystem::is_empty(a.out), "--out {}: exists and is not empty",
                a.out);
  const LoadedCheckpoint loaded = load_for_inference("export", a.ckpt, a.overrides, "cpu:0");
  auto strategy = strategy_with_weights(loaded);
  const ExportedModel model = export_view(strategy->model(), loaded.recipe.name);
  const StDType dtype = a.dtype == "bfloat16" ? StDType::bf16 : (a.dtype == "float16" ? StDType::f16 : StDType::f32);
  const auto files = write_hf_model(model, a.out, dtype, static_cast<uint64_t>(a.shard_mb * 1e6));
  fmt::print("wrote {} (hf, {}, {} files) from {}\n  AutoModelForCausalLM.from_pretrained(\"{}\")\n", a.out, a.dtype,
             files.size(), loaded.header.path, a.out);
}

void export_model(const ExportArgs& a) {
  const std::string format = format_of(a);
  if (format == "hf") return export_hf(a);
  DT_USER_CHECK(format != "onnx" || a.out.ends_with(".onnx"), "--out {}: an ONNX export is FILE.onnx", a.out);
  DT_USER_CHECK(!a.external_data || format == "onnx", "--external-data: only an ONNX export keeps its weights beside it");
  const LoadedCheckpoint loaded = load_for_inference("export", a.ckpt, a.overrides, "cpu:0");
  check_output_file({"--out", a.out}, {{"--ckpt", loaded.header.path}});
  auto strategy = strategy_with_weights(loaded);
  const ExportedModel model = export_view(strategy->model(), loaded.recipe.name);
  const bool beside = format == "onnx" && write_onnx(model, a.out, a.external_data);
  if (format == "keras") write_keras(model, a.out);
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(a.out, ec);
  fmt::print("wrote {} ({}, {} layers, {:.1f} MB) from {}\n", a.out, format, model.layers.size(), static_cast<double>(bytes) / 1e6,
             loaded.header.path);
  if (format == "onnx")
    fmt::print("  input \"input\" {}, output \"logits\"{}\n", onnx_input_text(model),
               beside ? fmt::format("; weights in {}.data beside it", a.out) : "");
  else if (a.out.ends_with(".keras")) fmt::print("  keras.models.load_model(\"{}\")\n", a.out);
  else fmt::print("  model.load_weights(\"{}\") on the same layers built in Keras\n", a.out);
}

}  // namespace

void register_export(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "A checkpoint's model for Keras 3 (.keras, .weights.h5), ONNX (.onnx) or Hugging Face (a folder)");
  auto a = std::make_shared<ExportArgs>();
  cmd->add_option("--ckpt", a->ckpt, "Checkpoint file (ckpt-<step>.h5), or a run folder (its newest checkpoint)")->required();
  cmd->add_option("--out", a->out, "FILE.keras, FILE.weights.h5, FILE.onnx, or a new folder (--format hf)")->required();
  cmd->add_option("--format", a->format, "keras, onnx or hf (default: from --out's name)")
      ->check(CLI::IsMember({"keras", "onnx", "hf"}));
  cmd->add_option("--dtype", a->dtype, "hf: float32 (default), bfloat16 or float16")
      ->check(CLI::IsMember({"float32", "bfloat16", "float16"}));
  cmd->add_option("--shard-mb", a->shard_mb, "hf: at most this many MB a safetensors file (default 5000)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--external-data", a->external_data,
                "ONNX: the weights in FILE.onnx.data beside the graph (always past protobuf's 2 GiB)");
  cmd->add_option("--set", a->overrides, "Override a key of the stored recipe (repeatable)");
  cmd->callback([a] { export_model(*a); });
}

}  // namespace distrain::cli
