#include "datasets/dataset.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/base/error.hpp"
#include "core/base/rng.hpp"
#include "datasets/hdf5_data.hpp"
#include "datasets/idx.hpp"
#include "datasets/image_folder.hpp"
#include "datasets/token_data.hpp"

namespace distrain {

namespace {

// Each class is a fixed random prototype image; examples are the prototype plus noise,
// so the task is learnable and every value is reproducible from the seed.
Dataset make_synthetic(const DataSpec& spec, int64_t count, uint64_t prototype_seed, uint64_t seed) {
  Dataset d;
  d.source = "synthetic";
  d.example_shape = spec.image_shape;
  d.num_classes = spec.num_classes;
  const int64_t per = spec.image_shape.numel();
  std::vector<float> prototypes(static_cast<size_t>(per * spec.num_classes));
  Rng proto(prototype_seed);  // the same for both splits: test examples come from the same classes
  for (float& v : prototypes) v = static_cast<float>(proto.uniform(0, 255));
  Rng rng(seed);
  d.pixels.resize(static_cast<size_t>(per * count));
  d.labels.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const auto label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(spec.num_classes)));
    d.labels[static_cast<size_t>(i)] = label;
    for (int64_t j = 0; j < per; ++j) {
      const double v = prototypes[static_cast<size_t>(label * per + j)] + 60.0 * rng.normal();
      d.pixels[static_cast<size_t>(i * per + j)] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
    }
  }
  return d;
}

}  // namespace

std::string relative_note(const std::string& path) {
  if (path.empty() || std::filesystem::path(path).is_absolute()) return "";
  std::error_code ec;
  return fmt::format("; a relative data.path is taken from the current folder: {}",
                     std::filesystem::absolute(path, ec).lexically_normal().string());
}

std::string not_a_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  switch (fs::status(path, ec).type()) {
    case fs::file_type::regular: return "";
    case fs::file_type::directory: return "a folder, not a file";
    case fs::file_type::fifo: return "a named pipe (FIFO), not a regular file; distrain reads data files whole";
    case fs::file_type::character: return "a character device, not a regular file; distrain reads data files whole";
    case fs::file_type::block: return "a block device, not a regular file";
    case fs::file_type::socket: return "a socket, not a regular file";
    default: return "not found";
  }
}

std::string default_data_path(const std::string& dataset) {
  if (dataset == "fashion_mnist") return "/usr/share/datasets/fashion-mnist";
  if (dataset == "mnist") return "/usr/share/datasets/mnist";
  return "";
}

namespace {

// data.validation_split as Keras's fit takes it: the last share of the training examples,
// before any shuffling, validates instead of the test split.
Splits held_out_last(Splits splits, double share) {
  Dataset& train = splits.train;
  const int64_t n = train.size(), held = std::llround(share * static_cast<double>(n));
  DT_USER_CHECK(held < n, "{}: data.validation_split {} leaves no example to train on", train.source, share);
  DT_USER_CHECK(held > 0, "{}: data.validation_split {} of {} examples holds out none to validate on", train.source, share, n);
  const int64_t per = train.example_shape.numel(), keep = n - held;
  Dataset validation;
  validation.source = train.source + " (validation_split)";
  validation.example_shape = train.example_shape;
  validation.num_classes = train.num_classes;
  validation.class_names = train.class_names;
  validation.labels.assign(train.labels.begin() + keep, train.labels.end());
  train.labels.resize(static_cast<size_t>(keep));
  if (!train.pixels.empty()) {
    validation.pixels.assign(train.pixels.begin() + keep * per, train.pixels.end());
    train.pixels.resize(static_cast<size_t>(keep * per));
  } else {
    validation.floats.assign(train.floats.begin() + keep * per, train.floats.end());
    train.floats.resize(static_cast<size_t>(keep * per));
  }
  splits.test = std::move(validation);
  return splits;
}

// The splits as the data holds them (an image folder and token data hold out their own
// validation).
Splits splits_as_stored(const DataSpec& spec, uint64_t seed) {
  if (spec.dataset == "synthetic") {
    DT_USER_CHECK(spec.train_examples > 0 && spec.test_examples > 0 && spec.num_classes >= 2,
                  "data: synthetic needs train_examples > 0, test_examples > 0 and num_classes >= 2");
    return Splits{make_synthetic(spec, spec.train_examples, derive_seed(seed, 1), derive_seed(seed, 100)),
                  make_synthetic(spec, spec.test_examples, derive_seed(seed, 1), derive_seed(seed, 200))};
  }
  if (spec.dataset == "hdf5") return read_hdf5_splits(spec);
  if (spec.dataset == "image_folder") return read_image_folder_splits(spec, seed);
  if (spec.dataset == "text") return read_text_splits(spec);
  if (spec.dataset == "tokens") return read_token_splits(spec);
  DT_USER_CHECK(spec.dataset == "fashion_mnist" || spec.dataset == "mnist",
                "data.dataset: unknown dataset '{}' (known: fashion_mnist, mnist, synthetic, hdf5, image_folder, text, tokens)", spec.dataset);
  const std::string dir = spec.path.empty() ? default_data_path(spec.dataset) : spec.path;
  std::error_code ec;  // a path through a file or an unreadable folder: reported below, not thrown
  DT_USER_CHECK(!std::filesystem::exists(dir, ec) || std::filesystem::is_directory(dir, ec),
                "data.path: {} is a file, not a folder; set data.path to the folder of the IDX files", dir);
  if (!std::filesystem::is_directory(dir, ec)) {
    const std::string hint = spec.dataset == "fashion_mnist" ? "apt-get install dataset-fashion-mnist" : "download the MNIST IDX files";
    throw UserError(fmt::format("data.path: folder {} does not exist ({} or set data.path to a folder of IDX files){}", dir,
                                hint, relative_note(dir)));
  }
  Splits splits{read_idx_split(dir, "train"), read_idx_split(dir, "t10k")};
  DT_USER_CHECK(splits.test.example_shape == splits.train.example_shape,
                "{} has images of {}, the training images ({}) {}; both splits must have one image size",
                splits.test.source, splits.test.example_shape.str(), splits.train.source, splits.train.example_shape.str());
  return splits;
}

}  // namespace

Splits load_dataset(const DataSpec& spec, uint64_t seed) {
  if (spec.dataset == "image_folder" || spec.token_data() || spec.validation_split <= 0) return splits_as_stored(spec, seed);
  return held_out_last(splits_as_stored(spec, seed), spec.validation_split);
}

}  // namespace distrain
