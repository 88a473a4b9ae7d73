// distrain predict --ckpt CKPT|RUN_DIR --data PATH [--dataset NAME] [--out FILE.csv|.npy|.h5]
//                  [--probabilities] [--set KEY=VALUE]... [--device D]:
// each example's class (and its class probabilities) for new data: PNG or JPEG files (one,
// or a folder's, resized to the model's input), an NPY array, an IDX image file (plain or
// gzip) or a dataset of an HDF5 file. Class names where the checkpoint has them (a model
// trained on an image folder). Without --out the CSV goes to standard output; progress goes
// to standard error.
#include <fstream>
#include <filesystem>
#include <system_error>

#include "cli/commands.hpp"
#include "cli/inference.hpp"
#include "core/base/h5_id.hpp"
#include "core/io/predictions_file.hpp"
#include "core/model/model.hpp"
#include "core/train/predict.hpp"
#include "datasets/dataset.hpp"
#include "datasets/hdf5_data.hpp"
#include "datasets/idx.hpp"
#include "datasets/image_file.hpp"
#include "datasets/image_folder.hpp"
#include "datasets/npy.hpp"

namespace distrain::cli {

namespace {

struct PredictArgs {
  std::string ckpt, data, dataset = "x_test", out, device = "cpu:0";
  std::vector<std::string> overrides;
  bool probabilities = false;
};

// Images are told apart by their extension (or a folder of them), NPY and HDF5 files from
// IDX files by their signature, not by their name.
Dataset read_inputs(const PredictArgs& a, const Shape& input_shape) {
  std::error_code ec;
  if (std::filesystem::is_directory(a.data, ec) || is_image_file(a.data)) {
    DT_USER_CHECK(input_shape.rank() == 3 && (input_shape[2] == 1 || input_shape[2] == 3),
                  "--data {}: images, and the model takes examples of {}, not [height, width, 1 or 3]", a.data,
                  input_shape.str());
    return read_image_files(a.data, input_shape);
  }
  const std::string problem = not_a_file(a.data);
  DT_USER_CHECK(problem.empty(), "--data {}: {} (PNG or JPEG files, an NPY, IDX or HDF5 file)", a.data, problem);
  if (is_npy_file(a.data)) return read_npy_examples(a.data, input_shape);
  quiet_hdf5();
  return H5Fis_hdf5(a.data.c_str()) > 0 ? read_hdf5_images(a.data, a.dataset) : read_idx_images(a.data);
}

// A language model's logits (N, T, V) float32 for token windows (N, T) in an NPY file,
// eval_batch windows at a time, into --out FILE.npy.
void predict_logits(const PredictArgs& a, const LoadedCheckpoint& loaded) {
  DT_USER_CHECK(a.out.ends_with(".npy") && !a.probabilities,
                "--out: a language model's predictions are its logits, written as FILE.npy (N, T, vocabulary)");
  DT_USER_CHECK(is_npy_file(a.data), "--data {}: token windows as an NPY array (N, {}) of int32 or int64 ids", a.data,
                loaded.recipe.model().input_shape[0]);
  check_output_file({"--out", a.out}, {{"--ckpt", loaded.header.path}, {"--data", a.data}});
  auto strategy = strategy_with_weights(loaded);
  Model& model = strategy->model();
  const int64_t t = model.input_shape()[0], vocab = model.output_shape().numel() / t;
  const TokenWindows windows = read_npy_token_windows(a.data, t);
  std::ofstream out(a.out, std::ios::binary | std::ios::trunc);
  out << npy_header("<f4", {windows.count, t, vocab});
  const int64_t batch = std::max<int64_t>(1, loaded.recipe.train.eval_batch);
  std::vector<float> host;
  for (int64_t first = 0; first < windows.count; first += batch) {
    const int64_t n = std::min(batch, windows.count - first);
    Buffer ids(model.backend(), Shape{n, t}, DType::i32);
    model.backend().upload(windows.ids.data() + first * t, ids.view());
    Ctx ctx{model.backend(), false};
    const Tensor logits = model.forward(ctx, ids.view());
    host.resize(static_cast<size_t>(logits.numel()));
    model.backend().download(logits, host.data());
    out.write(reinterpret_cast<const char*>(host.data()), static_cast<std::streamsize>(host.size() * sizeof(float)));
  }
  out.flush();
  DT_USER_CHECK(out.good(), "{}: cannot write", a.out);
  fmt::print(stderr, "wrote the logits of {} windows of {} tokens over {} classes to {}\n", windows.count, t, vocab, a.out);
}

void predict_classes(const PredictArgs& a) {
  const LoadedCheckpoint loaded = load_for_inference("predict", a.ckpt, a.overrides, a.device);
  if (!loaded.header.vocabulary.empty() || loaded.recipe.data.dataset == "text" || loaded.recipe.data.dataset == "tokens")
    return predict_logits(a, loaded);
  if (!a.out.empty()) {
    check_predictions_format(a.out);
    check_output_file({"--out", a.out}, {{"--ckpt", loaded.header.path}, {"--data", a.data}});
  }
  const Dataset inputs = read_inputs(a, loaded.recipe.model().input_shape);
  auto strategy = strategy_with_weights(loaded);
  Model& model = strategy->model();
  DT_USER_CHECK(model.input_shape() == inputs.example_shape, "{}: examples of {}, the model ({}) takes {}", inputs.source,
                inputs.example_shape.str(), loaded.header.path, model.input_shape().str());
  int64_t next_report = 0;
  const auto report = [&](int64_t done, int64_t total) {  // about ten lines, on stderr: stdout may hold the CSV
    if (done < next_report && done < total) return;
    fmt::print(stderr, "predicted {}/{} examples\n", done, total);
    next_report = done + std::max<int64_t>(1, total / 10);
  };
  Predictions p = predict(model, loaded.recipe.loss, inputs, loaded.recipe.train.eval_batch, a.probabilities, report);
  if (static_cast<int64_t>(loaded.header.class_names.size()) == p.num_classes) p.class_names = loaded.header.class_names;
  p.files = inputs.files;
  if (!a.out.empty()) return write_predictions(a.out, p);
  try {
    write_predictions_csv(stdout, p);
  } catch (const std::system_error& e) {  // fmt's print: a full disk or a closed pipe
    throw UserError(fmt::format("standard output: cannot write ({})", e.code().message()));
  }
  flush_stdout();
}

}  // namespace

void register_predict(CLI::App& app) {
  auto* cmd = app.add_subcommand("predict", "Classes (and probabilities) of a checkpoint's model for new data");
  auto a = std::make_shared<PredictArgs>();
  cmd->add_option("--ckpt", a->ckpt, "Checkpoint file (ckpt-<step>.h5), or a run folder (its newest checkpoint)")->required();
  cmd->add_option("--data", a->data,
                  "PNG or JPEG files (one, or a folder's at any depth), an NPY array (N, input shape), an IDX image file "
                  "(plain or .gz) or an HDF5 file")
      ->required();
  cmd->add_option("--dataset", a->dataset, "The images' dataset in an HDF5 file")->capture_default_str();
  cmd->add_option("--out", a->out, "Write to FILE.csv, FILE.npy or FILE.h5 (default: CSV on standard output)");
  cmd->add_flag("--probabilities", a->probabilities, "Also each class's probability");
  cmd->add_option("--set", a->overrides, "Override a key of the stored recipe: --set train.eval_batch=256 (repeatable)");
  cmd->add_option("--device", a->device, "Device to predict on")->capture_default_str();
  cmd->callback([a] { predict_classes(*a); });
}

}  // namespace distrain::cli
