#include "datasets/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/base/error.hpp"
#include "datasets/dataset.hpp"

namespace distrain {

namespace {

// zlib reads gzip and plain files alike.
std::vector<uint8_t> read_all(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  DT_USER_CHECK(f, "{}: cannot open ({}); make it readable or set data.path to another folder", path, std::strerror(errno));
  std::vector<uint8_t> data;
  uint8_t chunk[1 << 16];
  for (;;) {
    const int n = gzread(f, chunk, sizeof chunk);
    if (n < 0) {
      int code = 0;
      const std::string msg = gzerror(f, &code);
      gzclose(f);
      throw UserError(fmt::format("{}: corrupt or truncated gzip data ({})", path, msg));
    }
    if (n == 0) break;
    data.insert(data.end(), chunk, chunk + n);
  }
  // A gzip stream cut short reads as a clean end in some zlib versions; ask explicitly.
  int code = 0;
  gzerror(f, &code);
  gzclose(f);
  DT_USER_CHECK(code == Z_OK || code == Z_STREAM_END, "{}: corrupt or truncated gzip data", path);
  return data;
}

uint32_t be32(std::span<const uint8_t> d, size_t at) {
  return (uint32_t{d[at]} << 24) | (uint32_t{d[at + 1]} << 16) | (uint32_t{d[at + 2]} << 8) | d[at + 3];
}

std::string find_file(const std::string& dir, const std::string& name) {
  for (const std::string& candidate : {dir + "/" + name, dir + "/" + name + ".gz"})
    if (std::error_code ec; std::filesystem::exists(candidate, ec)) return candidate;
  throw UserError(fmt::format("{}/{}[.gz]: not found", dir, name));
}

}  // namespace

Dataset read_idx_split(const std::string& dir, const std::string& prefix) {
  const std::string image_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  const std::vector<uint8_t> images = read_all(image_path);
  const std::vector<uint8_t> labels = read_all(label_path);
  return parse_idx(images, labels, image_path, label_path);
}

Dataset read_idx_images(const std::string& path) {
  const std::string problem = not_a_file(path);
  DT_USER_CHECK(problem.empty(), "{}: {} (an IDX image file or an HDF5 file)", path, problem);
  return parse_idx_images(read_all(path), path);
}

Dataset parse_idx(std::span<const uint8_t> images, std::span<const uint8_t> labels, const std::string& image_path,
                  const std::string& label_path) {
  Dataset d = parse_idx_images(images, image_path);
  const uint32_t n = be32(images, 4);
  DT_USER_CHECK(labels.size() >= 8, "{}: truncated: {} bytes, an IDX label header has 8", label_path, labels.size());
  DT_USER_CHECK(be32(labels, 0) == 0x801, "{}: not an IDX label file (magic 0x{:08x}, expected 0x00000801)", label_path,
                be32(labels, 0));
  DT_USER_CHECK(be32(labels, 4) == n, "{}: {} labels for {} images in {}", label_path, be32(labels, 4), n, image_path);
  DT_USER_CHECK(labels.size() == 8 + size_t{n}, "{}: {} bytes, expected {} (truncated?)", label_path, labels.size(),
                8 + size_t{n});
  d.labels.assign(labels.begin() + 8, labels.end());
  const int32_t max_label = *std::max_element(d.labels.begin(), d.labels.end());
  d.num_classes = 10;  // MNIST and Fashion-MNIST
  DT_USER_CHECK(max_label < d.num_classes, "{}: label {} outside 0..9", label_path, max_label);
  return d;
}

Dataset parse_idx_images(std::span<const uint8_t> images, const std::string& image_path) {
  DT_USER_CHECK(images.size() >= 16, "{}: truncated: {} bytes, an IDX image header has 16", image_path, images.size());
  DT_USER_CHECK(be32(images, 0) == 0x803, "{}: not an IDX image file (magic 0x{:08x}, expected 0x00000803)", image_path,
                be32(images, 0));
  const uint32_t n = be32(images, 4), rows = be32(images, 8), cols = be32(images, 12);
  DT_USER_CHECK(n > 0 && rows > 0 && cols > 0 && rows <= 4096 && cols <= 4096, "{}: implausible dimensions {}x{}x{}",
                image_path, n, rows, cols);
  const size_t expected = 16 + size_t{n} * rows * cols;
  DT_USER_CHECK(images.size() == expected, "{}: {} bytes, expected {} for {} images of {}x{}{}", image_path,
                images.size(), expected, n, rows, cols, images.size() < expected ? " (truncated)" : "");
  Dataset d;
  d.source = image_path;
  d.example_shape = Shape{rows, cols, 1};
  d.pixels.assign(images.begin() + 16, images.end());
  return d;
}

}  // namespace distrain
