// Predictions written for other tools: CSV (a spreadsheet, pandas), NPY (numpy.load) or
// HDF5 (h5py), chosen by the file's extension.
//   .csv  index,class[,class_name][,file][,p0,...,p<C-1>]: a header, then one row per example
//         (class_name where the model's classes have names, file where the examples were
//         image files)
//   .npy  the probabilities (N, C) float32 when they were asked for, else the classes (N,) int32
//   .h5   datasets "classes" (N,) int32 and, when asked for, "probabilities" (N, C) float32
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace distrain {

struct Predictions {
  int64_t num_classes = 0;
  std::vector<int32_t> classes;      // (N): each example's most likely class
  std::vector<float> probabilities;  // (N, num_classes), empty unless asked for
  std::vector<std::string> class_names;  // by class index, when the classes have names
  std::vector<std::string> files;        // (N) each example's image file, when read from files
};

// Throws UserError naming the file for an extension it does not know or a failed write.
void write_predictions(const std::string& path, const Predictions& p);
// An NPY 1.0 header for an array of `descr` ("<f4", "<i4") and `shape`, C order.
std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape);

// A UserError unless `path` names a format write_predictions writes (.csv, .npy, .h5):
// checked before predicting.
void check_predictions_format(const std::string& path);
// The CSV form, to a stream (standard output when no file is named).
void write_predictions_csv(std::FILE* out, const Predictions& p);

}  // namespace distrain
