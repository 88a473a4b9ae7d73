#include "datasets/image_folder.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "core/base/error.hpp"
#include "core/base/rng.hpp"
#include "datasets/image_file.hpp"

namespace distrain {

namespace {

namespace fs = std::filesystem;

struct LabelledFile {
  std::string path;
  int32_t label = -1;  // -1: unlabelled (predict)
};

void check_folder(const std::string& path, const std::string& key) {
  std::error_code ec;
  DT_USER_CHECK(fs::exists(path, ec), "{}: folder {} does not exist{}", key, path, relative_note(path));
  DT_USER_CHECK(fs::is_directory(path, ec), "{}: {} is a file; give the folder of class folders", key, path);
}

// The image files under `dir` at any depth, sorted by path (a folder listing has no order).
std::vector<std::string> image_files_under(const fs::path& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end;
       !ec && it != end; it.increment(ec))
    if (std::error_code type; it->is_regular_file(type) && is_image_file(it->path().string())) files.push_back(it->path().string());
  DT_USER_CHECK(!ec, "{}: cannot list ({})", dir.string(), ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<LabelledFile> labelled_files(const std::string& path, const std::vector<std::string>& classes) {
  std::vector<LabelledFile> files;
  for (size_t c = 0; c < classes.size(); ++c) {
    const std::vector<std::string> found = image_files_under(fs::path(path) / classes[c]);
    DT_USER_CHECK(!found.empty(), "{}: the class folder {} holds no PNG or JPEG file", path, classes[c]);
    for (const std::string& f : found) files.push_back({f, static_cast<int32_t>(c)});
  }
  return files;
}

// Every file decoded to `shape`, on every thread (each into its own slot: the same bytes on
// any number of threads). The first file, in order, that cannot be read is the error.
Dataset decode(const std::vector<LabelledFile>& files, const Shape& shape, const std::string& source, int64_t classes) {
  Dataset d;
  d.source = source;
  d.example_shape = shape;
  d.num_classes = classes;
  const int64_t n = static_cast<int64_t>(files.size()), per = shape.numel();
  d.pixels.resize(static_cast<size_t>(n * per));
  std::vector<std::string> errors(files.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t i = 0; i < n; ++i) {
    try {  // an exception must not leave an OpenMP region
      std::vector<uint8_t> pixels;
      pixels.reserve(static_cast<size_t>(per));
      read_image_file(files[static_cast<size_t>(i)].path, shape, pixels);
      std::copy(pixels.begin(), pixels.end(), d.pixels.begin() + i * per);
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(i)] = e.what();
    }
  }
  for (const std::string& e : errors) DT_USER_CHECK(e.empty(), "{}", e);
  if (classes > 0)
    for (const LabelledFile& f : files) d.labels.push_back(f.label);
  return d;
}

// The files held out for validation: a share drawn by the seed (the same every run), each
// split kept in path order.
std::pair<std::vector<LabelledFile>, std::vector<LabelledFile>> held_out(const std::vector<LabelledFile>& files,
                                                                        double share, uint64_t seed) {
  std::vector<size_t> order(files.size());
  std::iota(order.begin(), order.end(), 0);
  Rng rng(derive_seed(seed, 300));
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  const auto held = static_cast<size_t>(std::lround(share * static_cast<double>(files.size())));
  std::vector<bool> validates(files.size(), false);
  for (size_t i = 0; i < held; ++i) validates[order[i]] = true;
  std::vector<LabelledFile> train, validation;
  for (size_t i = 0; i < files.size(); ++i) (validates[i] ? validation : train).push_back(files[i]);
  return {train, validation};
}

}  // namespace

std::vector<std::string> image_folder_classes(const std::string& path) {
  check_folder(path, "data.path");
  std::vector<std::string> classes;
  std::error_code ec;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
    if (std::error_code type; it->is_directory(type)) classes.push_back(it->path().filename().string());
  DT_USER_CHECK(!ec, "{}: cannot list ({})", path, ec.message());
  std::sort(classes.begin(), classes.end());
  DT_USER_CHECK(classes.size() >= 2, "{}: {} class folder(s); an image folder holds one folder per class, at least two",
                path, classes.size());
  return classes;
}

Splits read_image_folder_splits(const DataSpec& spec, uint64_t seed) {
  const std::vector<std::string> classes = image_folder_classes(spec.path);
  const auto count = static_cast<int64_t>(classes.size());
  std::vector<LabelledFile> files = labelled_files(spec.path, classes);
  Splits s;
  if (!spec.test_path.empty()) {
    check_folder(spec.test_path, "data.test_path");
    const std::vector<std::string> test_classes = image_folder_classes(spec.test_path);
    DT_USER_CHECK(test_classes == classes, "data.test_path: {} has the class folders [{}], data.path {} has [{}]; both need the same",
                  spec.test_path, fmt::join(test_classes, ", "), spec.path, fmt::join(classes, ", "));
    s.train = decode(files, spec.image_shape, spec.path, count);
    s.test = decode(labelled_files(spec.test_path, classes), spec.image_shape, spec.test_path, count);
  } else {
    auto [train, validation] = held_out(files, spec.validation_split, seed);
    DT_USER_CHECK(!train.empty(), "{}: data.validation_split {} leaves no file to train on", spec.path, spec.validation_split);
    DT_USER_CHECK(!validation.empty() || spec.validation_split == 0, "{}: data.validation_split {} of {} files holds out none to "
                  "validate on", spec.path, spec.validation_split, files.size());
    s.train = decode(train, spec.image_shape, spec.path, count);
    s.test = decode(validation, spec.image_shape, spec.path + " (validation_split)", count);
  }
  s.train.class_names = s.test.class_names = classes;
  return s;
}

Dataset read_image_files(const std::string& path, const Shape& shape) {
  std::error_code ec;
  std::vector<LabelledFile> files;
  if (fs::is_directory(path, ec)) {
    for (const std::string& f : image_files_under(path)) files.push_back({f, -1});
    DT_USER_CHECK(!files.empty(), "{}: a folder with no PNG or JPEG file", path);
  } else {
    DT_USER_CHECK(is_image_file(path), "{}: not a PNG or JPEG file (by its extension)", path);
    files.push_back({path, -1});
  }
  Dataset d = decode(files, shape, path, 0);
  for (const LabelledFile& f : files) d.files.push_back(f.path);
  return d;
}

}  // namespace distrain
