// Dataset: labelled images held in memory as raw bytes (N, H, W, C) uint8. The loader
// turns them into float32 values in [0, 255]; scaling belongs to the model (rescaling).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/shape.hpp"

namespace distrain {

struct Dataset {
  std::string source;     // a path or "synthetic", for messages
  Shape example_shape;    // (H, W, C)
  int64_t num_classes = 0;
  std::vector<uint8_t> pixels;  // size() * example_shape.numel()
  std::vector<int32_t> labels;  // in [0, num_classes)
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

struct DataSpec {
  std::string dataset = "fashion_mnist";  // fashion_mnist | mnist | synthetic
  std::string path;                       // folder of IDX files; default per dataset
  bool shuffle = true;
  bool drop_remainder = false;
  // synthetic only
  int64_t train_examples = 2048, test_examples = 512, num_classes = 10;
  Shape image_shape{28, 28, 1};
};

std::string default_data_path(const std::string& dataset);

struct Splits {
  Dataset train, test;
};

// Loads both splits. Throws UserError naming the file and what to do when files are
// missing, truncated or not IDX.
Splits load_dataset(const DataSpec& spec, uint64_t seed);

}  // namespace distrain
