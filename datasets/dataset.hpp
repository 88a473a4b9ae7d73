// Dataset: labelled examples held in memory, (N, H, W, C) images or (N, features) rows,
// as raw uint8 bytes or, from a user's float32 HDF5 data, as floats. The loader turns
// bytes into float32 values in [0, 255] and passes floats as they are; scaling belongs
// to the model (rescaling). Or token data for a language model: one stream of token ids
// cut into windows (datasets/token_data.hpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/base/shape.hpp"
#include "datasets/vocabulary.hpp"

namespace distrain {

struct Dataset {
  std::string source;     // a path or "synthetic", for messages
  Shape example_shape;    // (H, W, C) or (features)
  int64_t num_classes = 0;
  // size() * example_shape.numel() values, in exactly one of the two.
  std::vector<uint8_t> pixels;
  std::vector<float> floats;
  std::vector<int32_t> labels;  // in [0, num_classes); empty for data to predict
  std::vector<std::string> class_names;  // an image folder's class folders; empty elsewhere
  std::vector<std::string> files;        // images to predict read from files: each example's file
  // Token data (dataset "text" or "tokens"): the split's token ids in one stream. An
  // example is a window of `window` input tokens; its labels are the `window` tokens after
  // each of them (next-token prediction).
  std::vector<int32_t> tokens;
  int64_t window = 0;  // 0: not token data
  std::shared_ptr<const Vocabulary> vocabulary;  // token data only
  bool token_data() const { return window > 0; }
  // Examples per epoch. Token data: the windows that fit the split end to end (the last
  // window's labels need one token more), so an epoch sees every token once on average.
  int64_t size() const { return token_data() ? windows() : static_cast<int64_t>(labels.size()); }
  // The examples held, labelled or not.
  int64_t examples() const {
    if (token_data()) return windows();
    return static_cast<int64_t>(pixels.size() + floats.size()) / std::max<int64_t>(example_shape.numel(), 1);
  }

 private:
  int64_t windows() const { return tokens.empty() ? 0 : (static_cast<int64_t>(tokens.size()) - 1) / window; }
};

struct DataSpec {
  std::string dataset = "fashion_mnist";  // fashion_mnist | mnist | synthetic | hdf5 | image_folder | text | tokens
  // A language model's data: windows of token ids whose labels are the next tokens.
  bool token_data() const { return dataset == "text" || dataset == "tokens"; }
  // folder of IDX files (default per dataset); hdf5, text: the file; tokens: the folder of the token files
  std::string path;
  bool shuffle = true;
  bool drop_remainder = false;
  // Where the training split is kept: "auto" (on the devices when they are GPUs), "device"
  // (uploaded once, batches gathered there) or "host" (each batch built and uploaded).
  std::string placement = "auto";
  // synthetic only
  int64_t train_examples = 2048, test_examples = 512, num_classes = 10;
  // synthetic, image_folder: (H, W, C); an image folder's default is the model's input_shape
  Shape image_shape{28, 28, 1};
  // image_folder only: the folder of class folders that validates ("" : validation_split of path's)
  std::string test_path;
  double validation_split = 0.0;
  // hdf5 only: the datasets inside the file (num_classes 0: the largest label + 1)
  std::string train_images = "x_train", train_labels = "y_train", test_images = "x_test", test_labels = "y_test";
  // text and tokens: tokens per window (the model's context length)
  int64_t seq_len = 0;
  // text only: "bytes" or "characters", and the share of the file (its end) that validates
  std::string vocabulary = "characters";
  double validation_fraction = 0.1;
  // text: a tokenizer file (a byte-level BPE tokenizer.json) instead of `vocabulary`, its
  // ids cached beside the text file (token_data.hpp); tokens: the tokenizer the ids came
  // from, for generate (its size is vocab_size's, or must equal a vocab_size given)
  std::string tokenizer;
  bool vocab_size_given = false;
  // tokens only: the ids' range, and the split files (relative ones are inside `path`)
  int64_t vocab_size = 50257;
  std::string train_file = "train.bin", val_file = "val.bin";
  // "auto" (llm.c's header told apart by its magic), "raw" or "llmc"
  std::string token_format = "auto";
};

std::string default_data_path(const std::string& dataset);
// For messages about a data.path not found: where a relative one was looked for ("" for
// an absolute one).
std::string relative_note(const std::string& path);
// Why `path` is not a regular file to read: "not found", or what it is instead (a named
// pipe, a device: reading one would block or never end); "" for a regular file.
std::string not_a_file(const std::string& path);

struct Splits {
  Dataset train, test;
};

// Loads both splits. Throws UserError naming the file and what to do when files are
// missing, truncated, or not IDX (HDF5) files of the expected shapes.
Splits load_dataset(const DataSpec& spec, uint64_t seed);

}  // namespace distrain
