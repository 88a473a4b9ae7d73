#include "datasets/hdf5_data.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include <fmt/ranges.h>

#include "core/base/error.hpp"
#include "core/base/h5_id.hpp"
#include "core/base/host_memory.hpp"

namespace distrain {

namespace {

// Where an array comes from, for messages: the file, the dataset and the recipe key naming it.
struct Source {
  const std::string& file;
  const std::string& name;
  std::string key;
  // The recipe key, or the command-line flag, that named the dataset.
  std::string setting() const { return key.starts_with("--") ? key : "data." + key; }
  std::string str() const { return fmt::format("{}: '{}' ({})", file, name, setting()); }
};

H5Id open_file(const std::string& path) {
  quiet_hdf5();
  DT_USER_CHECK(!std::filesystem::is_directory(path), "{}: a folder, not an HDF5 file (data.path)", path);
  const std::string problem = not_a_file(path);
  DT_USER_CHECK(problem.empty(), "{}: {} (data.path){}", path, problem, problem == "not found" ? relative_note(path) : "");
  DT_USER_CHECK(H5Fis_hdf5(path.c_str()) > 0, "{}: not an HDF5 file (data.path)", path);
  H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  DT_USER_CHECK(f.ok(), "{}: cannot open as HDF5 (truncated or corrupt?)", path);
  return f;
}

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* names) {
  auto& out = *static_cast<std::string*>(names);
  out += (out.empty() ? "" : ", ") + std::string(name);
  return 0;
}

// The names at the top of the file, to say what a missing dataset could have been.
std::string top_level_names(hid_t file) {
  std::string names;
  H5Literate(file, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_name, &names);
  return names.empty() ? "nothing" : names;
}

H5Id open_dataset(hid_t file, const Source& src) {
  // H5Lexists fails (< 0) on a missing intermediate group: missing as well.
  DT_USER_CHECK(H5Lexists(file, src.name.c_str(), H5P_DEFAULT) > 0, "{}: no dataset '{}' ({}); the file has {}",
                src.file, src.name, src.setting(), top_level_names(file));
  H5Id ds(H5Dopen2(file, src.name.c_str(), H5P_DEFAULT), H5Dclose);
  DT_USER_CHECK(ds.ok(), "{} is not a dataset", src.str());
  return ds;
}

// The dataset's shape, refused where its element count overflows or where holding it
// (as `bytes_per_element`) would take more memory than the machine has: a corrupt or
// hostile header must be named, not met with a failed allocation.
Shape shape_of(hid_t ds, const Source& src, int64_t bytes_per_element) {
  H5Id space(H5Dget_space(ds), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  const std::string claimed = fmt::format("({})", fmt::join(dims, ", "));
  int64_t bytes = bytes_per_element;
  for (hsize_t d : dims)
    DT_USER_CHECK(d <= static_cast<hsize_t>(std::numeric_limits<int64_t>::max()) &&
                      !__builtin_mul_overflow(bytes, static_cast<int64_t>(d), &bytes),
                  "{} has shape {}, too many elements to address; the file is corrupt", src.str(), claimed);
  const std::optional<int64_t> available = available_host_memory();
  DT_USER_CHECK(!available || bytes <= *available, "{} has shape {}: {} in memory, more than the {} this machine has free",
                src.str(), claimed, format_bytes(bytes), format_bytes(available.value_or(0)));
  return Shape(std::vector<int64_t>(dims.begin(), dims.end()));
}

std::string type_name(hid_t type) {
  const size_t bits = 8 * H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_INTEGER: return fmt::format("{}int{}", H5Tget_sign(type) == H5T_SGN_NONE ? "u" : "", bits);
    case H5T_FLOAT: return fmt::format("float{}", bits);
    case H5T_STRING: return "string";
    default: return "a compound or other non-numeric type";
  }
}

void read_all(hid_t ds, hid_t memory_type, void* out, const Source& src) {
  DT_USER_CHECK(H5Dread(ds, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) >= 0, "{}: cannot read (file truncated or corrupt?)",
                src.str());
}

Dataset read_images(hid_t file, const Source& src) {
  H5Id ds = open_dataset(file, src);
  const Shape shape = shape_of(ds, src, sizeof(float));
  DT_USER_CHECK(shape.rank() >= 2 && shape.rank() <= 4,
                "{} has shape {}; images must be (N, H, W, C), (N, H, W) or (N, features)", src.str(), shape.str());
  DT_USER_CHECK(shape.numel() > 0, "{} has shape {}: no examples", src.str(), shape.str());
  Dataset d;
  d.source = src.file + ":" + src.name;
  d.example_shape = shape.rank() == 3 ? Shape{shape[1], shape[2], 1}  // (N, H, W): one channel
                                      : Shape(std::vector<int64_t>(shape.dims().begin() + 1, shape.dims().end()));
  H5Id type(H5Dget_type(ds), H5Tclose);
  const bool u8 = H5Tget_class(type) == H5T_INTEGER && H5Tget_size(type) == 1 && H5Tget_sign(type) == H5T_SGN_NONE;
  const bool real = H5Tget_class(type) == H5T_FLOAT && (H5Tget_size(type) == 4 || H5Tget_size(type) == 8);
  DT_USER_CHECK(u8 || real, "{} is {}; images must be uint8 or float32 (float64 is read as float32)", src.str(),
                type_name(type));
  if (u8) {
    d.pixels.resize(static_cast<size_t>(shape.numel()));
    read_all(ds, H5T_NATIVE_UINT8, d.pixels.data(), src);
  } else {
    d.floats.resize(static_cast<size_t>(shape.numel()));
    read_all(ds, H5T_NATIVE_FLOAT, d.floats.data(), src);
  }
  return d;
}

// Labels (N) or (N, 1) of any integer type, as int32.
std::vector<int32_t> read_labels(hid_t file, const Source& src) {
  H5Id ds = open_dataset(file, src);
  const Shape shape = shape_of(ds, src, sizeof(int64_t) + sizeof(int32_t));
  DT_USER_CHECK(shape.rank() == 1 || (shape.rank() == 2 && shape[1] == 1), "{} has shape {}; labels must be (N,) or (N, 1)",
                src.str(), shape.str());
  H5Id type(H5Dget_type(ds), H5Tclose);
  DT_USER_CHECK(H5Tget_class(type) == H5T_INTEGER, "{} is {}; labels must be integers (class indices 0, 1, ...)",
                src.str(), type_name(type));
  std::vector<int64_t> stored(static_cast<size_t>(shape[0]));
  read_all(ds, H5T_NATIVE_INT64, stored.data(), src);
  std::vector<int32_t> labels(stored.size());
  for (size_t i = 0; i < stored.size(); ++i) {
    DT_USER_CHECK(stored[i] >= 0 && stored[i] < std::numeric_limits<int32_t>::max(),
                  "{} has label {} at index {}; labels must be class indices 0, 1, ...", src.str(), stored[i], i);
    labels[i] = static_cast<int32_t>(stored[i]);
  }
  return labels;
}

Dataset read_split(hid_t file, const Source& images, const Source& labels) {
  Dataset d = read_images(file, images);
  d.labels = read_labels(file, labels);
  const auto examples = static_cast<int64_t>(d.pixels.size() + d.floats.size()) / d.example_shape.numel();
  DT_USER_CHECK(d.size() == examples, "{} has {} labels for the {} examples of '{}' (data.{})", labels.str(), d.size(),
                examples, images.name, images.key);
  return d;
}

// Test examples must be finite: a NaN makes its evaluation batch's loss NaN, which would
// be reported as a validation loss. (A training batch with one is the step policy's to
// handle: train.on_nonfinite stops or skips the step.)
void check_finite(const Dataset& d, const Source& src) {
  const auto bad = std::find_if(d.floats.begin(), d.floats.end(), [](float v) { return !std::isfinite(v); });
  DT_USER_CHECK(bad == d.floats.end(), "{} holds {} at example {} (element {}); test examples must be finite numbers",
                src.str(), *bad, (bad - d.floats.begin()) / d.example_shape.numel(), bad - d.floats.begin());
}

int32_t max_label(const Dataset& d) { return *std::max_element(d.labels.begin(), d.labels.end()); }

}  // namespace

Dataset read_hdf5_images(const std::string& path, const std::string& name) {
  const H5Id file = open_file(path);
  Dataset d = read_images(file, Source{path, name, "--dataset"});
  check_finite(d, Source{path, name, "--dataset"});
  return d;
}

Splits read_hdf5_splits(const DataSpec& spec) {
  const H5Id file = open_file(spec.path);
  const Source train_images{spec.path, spec.train_images, "train_images"}, train_labels{spec.path, spec.train_labels, "train_labels"};
  const Source test_images{spec.path, spec.test_images, "test_images"}, test_labels{spec.path, spec.test_labels, "test_labels"};
  Splits s{read_split(file, train_images, train_labels), read_split(file, test_images, test_labels)};
  check_finite(s.test, test_images);
  DT_USER_CHECK(s.test.example_shape == s.train.example_shape, "{} has examples of shape {}, '{}' (data.train_images) {}",
                test_images.str(), s.test.example_shape.str(), train_images.name, s.train.example_shape.str());
  const int64_t classes = spec.num_classes ? spec.num_classes : std::max(max_label(s.train), max_label(s.test)) + 1;
  for (const auto& [split, labels] : {std::pair{&s.train, &train_labels}, std::pair{&s.test, &test_labels}})
    DT_USER_CHECK(max_label(*split) < classes, "{} has label {}, outside 0..{} (data.num_classes = {})", labels->str(),
                  max_label(*split), classes - 1, classes);
  DT_USER_CHECK(classes >= 2, "{}: every label is 0 ('{}', '{}'); a classifier needs at least 2 classes", spec.path,
                train_labels.name, test_labels.name);
  s.train.num_classes = s.test.num_classes = classes;
  return s;
}

}  // namespace distrain
