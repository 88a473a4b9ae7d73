// Images in a folder of class folders, as Keras's image_dataset_from_directory reads them:
// each sub-folder of `path` is a class (named by the folder; classes sorted by name), its
// PNG and JPEG files (any depth) its examples, decoded once at load (on every thread) into
// 8-bit pixels of data.image_shape. Files of other types are not examples.
#pragma once
#include <string>
#include <vector>

#include "datasets/dataset.hpp"

namespace distrain {

// The training and validation splits of data.dataset = "image_folder": data.path's classes,
// validated on data.test_path (the same class folders) or, without one, on a share of the
// training files (data.validation_split, drawn by the seed: the same files every run).
Splits read_image_folder_splits(const DataSpec& spec, uint64_t seed);

// Unlabelled images to predict: a folder's image files (any depth; sorted by path) or one
// image file, each decoded to `shape`. `source` names them in messages.
Dataset read_image_files(const std::string& path, const Shape& shape);

// The class names of an image folder: its sub-folders, sorted.
std::vector<std::string> image_folder_classes(const std::string& path);

}  // namespace distrain
