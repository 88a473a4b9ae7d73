// A user's own data in one HDF5 file (data.dataset = "hdf5"), as h5py writes NumPy arrays:
// images (N, H, W, C), (N, H, W) (read as C = 1) or (N, features), uint8 or float32
// (float64 is read as float32), and integer labels (N) or (N, 1) of any integer type.
// docs/hdf5_data.md shows how to write such a file.
#pragma once
#include "datasets/dataset.hpp"

namespace distrain {

// Reads spec.train_images/train_labels and spec.test_images/test_labels from the file at
// spec.path. num_classes is spec.num_classes, or 0 there: the largest label + 1. Every
// problem (file missing or not HDF5, dataset missing, wrong rank or type, a label out of
// range, examples and labels of different counts) is a one-line UserError naming the
// file, the dataset and the recipe key.
Splits read_hdf5_splits(const DataSpec& spec);
// One dataset of images (or feature rows) alone, for prediction: a Dataset without labels.
Dataset read_hdf5_images(const std::string& path, const std::string& name);

}  // namespace distrain
