// IDX files (MNIST, Fashion-MNIST), plain or gzip-compressed: magic numbers, dimensions
// and lengths are checked, so a wrong or truncated file is an error, never garbage.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "datasets/dataset.hpp"

namespace distrain {

// Reads <dir>/<prefix>-images-idx3-ubyte[.gz] and <dir>/<prefix>-labels-idx1-ubyte[.gz]
// (prefix "train" or "t10k").
Dataset read_idx_split(const std::string& dir, const std::string& prefix);
// The same checks on the files' bytes (after gunzip); the names are for messages.
Dataset parse_idx(std::span<const uint8_t> images, std::span<const uint8_t> labels, const std::string& image_path,
                  const std::string& label_path);
// One image file alone (plain or gzip), for prediction: a Dataset without labels.
Dataset read_idx_images(const std::string& path);
Dataset parse_idx_images(std::span<const uint8_t> images, const std::string& image_path);

}  // namespace distrain
