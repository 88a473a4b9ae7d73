// One image file (PNG through libpng, JPEG through libjpeg-turbo) decoded into 8-bit
// pixels (H, W, C) of the channels a model takes: grey (1) or RGB (3), converted as
// Keras's loader converts them (luma for grey; alpha dropped), and resized bilinearly
// (half-pixel centres, as tf.image.resize) when its size differs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/shape.hpp"

namespace distrain {

// Whether `path` names an image this reader takes, by its extension (.png, .jpg, .jpeg,
// any case): a folder's other files are not images.
bool is_image_file(const std::string& path);

// The decoded pixels of `path` as `shape` (H, W, C with C 1 or 3), appended to `out`.
// A file that is not a readable PNG or JPEG is a UserError naming it and what is wrong.
void read_image_file(const std::string& path, const Shape& shape, std::vector<uint8_t>& out);

}  // namespace distrain
