#include "core/io/predictions_file.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/base/error.hpp"
#include "core/base/h5_id.hpp"

namespace distrain {

// NPY format 1.0: magic, version, a little-endian header length, then a Python dict
// literal padded with spaces to a multiple of 64 bytes and ended by a newline.
std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();  // (N,) keeps its comma, (N, C) does not need one
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  const size_t fixed = 10;  // magic (6), version (2), header length (2)
  dict.append(64 - (fixed + dict.size() + 1) % 64, ' ');
  dict += '\n';
  const auto len = static_cast<uint16_t>(dict.size());
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(len & 0xff) + static_cast<char>(len >> 8) + dict;
}

namespace {

void write_npy(const std::string& path, const Predictions& p) {
  const int64_t n = static_cast<int64_t>(p.classes.size());
  const bool probs = !p.probabilities.empty();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << (probs ? npy_header("<f4", {n, p.num_classes}) : npy_header("<i4", {n}));
  if (probs) out.write(reinterpret_cast<const char*>(p.probabilities.data()), static_cast<std::streamsize>(p.probabilities.size() * sizeof(p.probabilities[0])));
  else out.write(reinterpret_cast<const char*>(p.classes.data()), static_cast<std::streamsize>(p.classes.size() * sizeof(p.classes[0])));
  out.flush();
  DT_USER_CHECK(out.good(), "{}: cannot write ({})", path, errno ? std::strerror(errno) : "write failed");
}

void write_h5_array(hid_t file, const std::string& path, const char* name, hid_t type, hid_t memory, std::vector<hsize_t> dims,
                    const void* values) {
  H5Id space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  H5Id ds(H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  DT_USER_CHECK(ds.ok() && H5Dwrite(ds, memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, values) >= 0, "{}: cannot write '{}'", path,
                name);
}

void write_h5(const std::string& path, const Predictions& p) {
  quiet_hdf5();
  H5Id f(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  DT_USER_CHECK(f.ok(), "{}: cannot create ({})", path, errno ? std::strerror(errno) : "HDF5 refused it");
  const auto n = static_cast<hsize_t>(p.classes.size());
  write_h5_array(f, path, "classes", H5T_STD_I32LE, H5T_NATIVE_INT32, {n}, p.classes.data());
  if (!p.probabilities.empty())
    write_h5_array(f, path, "probabilities", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {n, static_cast<hsize_t>(p.num_classes)},
                   p.probabilities.data());
  DT_USER_CHECK(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0, "{}: cannot write (disk full?)", path);
}

}  // namespace

namespace {

// A CSV field: quoted (quotes doubled) where it holds a comma, a quote or a line break.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

void write_predictions_csv(std::FILE* out, const Predictions& p) {
  const bool probs = !p.probabilities.empty(), names = !p.class_names.empty(), files = !p.files.empty();
  fmt::print(out, "index,class{}{}", names ? ",class_name" : "", files ? ",file" : "");
  for (int64_t c = 0; probs && c < p.num_classes; ++c) fmt::print(out, ",p{}", c);
  fmt::print(out, "\n");
  for (size_t i = 0; i < p.classes.size(); ++i) {
    fmt::print(out, "{},{}", i, p.classes[i]);
    if (names) fmt::print(out, ",{}", csv_field(p.class_names.at(static_cast<size_t>(p.classes[i]))));
    if (files) fmt::print(out, ",{}", csv_field(p.files.at(i)));
    for (int64_t c = 0; probs && c < p.num_classes; ++c)
      fmt::print(out, ",{:.6g}", p.probabilities[i * static_cast<size_t>(p.num_classes) + static_cast<size_t>(c)]);
    fmt::print(out, "\n");
  }
}

void check_predictions_format(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  DT_USER_CHECK(ext == ".csv" || ext == ".npy" || ext == ".h5" || ext == ".hdf5", "{}: --out takes a .csv, .npy or .h5 file",
                path);
}

void write_predictions(const std::string& path, const Predictions& p) {
  check_predictions_format(path);
  const std::string ext = std::filesystem::path(path).extension().string();
  errno = 0;
  if (ext == ".npy") return write_npy(path, p);
  if (ext == ".h5" || ext == ".hdf5") return write_h5(path, p);
  std::FILE* out = std::fopen(path.c_str(), "w");
  DT_USER_CHECK(out, "{}: cannot create ({})", path, std::strerror(errno));
  std::string failure;
  try {
    write_predictions_csv(out, p);
  } catch (const std::system_error& e) {  // fmt's print: the write's own error
    failure = e.code().message();
  }
  const bool written = failure.empty() && std::ferror(out) == 0;
  errno = 0;
  const bool closed = std::fclose(out) == 0;
  if (failure.empty() && !(written && closed)) failure = errno ? std::strerror(errno) : "disk full?";
  DT_USER_CHECK(failure.empty(), "{}: cannot write ({})", path, failure);
}

}  // namespace distrain
