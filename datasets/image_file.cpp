#include "datasets/image_file.hpp"

// jpeglib.h uses FILE and size_t without including their headers.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>
#include <png.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <csetjmp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/base/error.hpp"

namespace distrain {

namespace {

constexpr int64_t kMaxPixels = int64_t{1} << 26;  // an 8k x 8k image: far past what a model takes
constexpr long kMaxDecoderBytes = 1L << 30;       // libjpeg's working memory (a progressive image's coefficients)

// Pixels as decoded: rows of width x channels bytes.
struct Decoded {
  int64_t height = 0, width = 0, channels = 0;  // channels: 1 grey, 2 grey + alpha, 3 RGB, 4 RGBA
  std::vector<uint8_t> bytes;
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_image(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  DT_USER_CHECK(f != nullptr, "{}: cannot open ({})", path, std::strerror(errno));
  return f;
}

// libpng reports errors through longjmp; its message is kept for the UserError.
struct PngError {
  std::string message;
};
void png_fail(png_structp png, png_const_charp message) {
  static_cast<PngError*>(png_get_error_ptr(png))->message = message;
  png_longjmp(png, 1);
}
void png_ignore_warning(png_structp, png_const_charp) {}

// Decodes into `d`. The C++ objects live in the caller: libpng's errors longjmp back to the
// setjmp here, past no destructor and into a frame whose locals were all set before it.
bool png_read_into(std::FILE* f, Decoded& d, std::vector<png_bytep>& rows, PngError& error) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &error, png_fail, png_ignore_warning);
  if (png == nullptr) return error.message = "cannot start the decoder", false;
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  png_init_io(png, f);
  png_read_info(png, info);
  // Every PNG as 8-bit grey, grey + alpha, RGB or RGBA: palettes expanded, 16 bits cut to 8,
  // sub-byte grey widened, transparency chunks made an alpha channel.
  png_set_expand(png);
  png_set_strip_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  d.width = png_get_image_width(png, info);
  d.height = png_get_image_height(png, info);
  if (d.width * d.height > kMaxPixels) {
    error.message = fmt::format("{} x {} pixels, more than this reader takes", d.width, d.height);
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  d.channels = png_get_channels(png, info);
  d.bytes.resize(static_cast<size_t>(d.height * d.width * d.channels));
  rows.resize(static_cast<size_t>(d.height));
  for (int64_t y = 0; y < d.height; ++y) rows[static_cast<size_t>(y)] = d.bytes.data() + y * d.width * d.channels;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

Decoded decode_png(const std::string& path) {
  File f = open_image(path);
  Decoded d;
  std::vector<png_bytep> rows;
  PngError error;
  DT_USER_CHECK(png_read_into(f.get(), d, rows, error), "{}: not a readable PNG image ({})", path, error.message);
  return d;
}

// CMYK pixels as RGB: each colour is what its ink and the black leave of white.
Decoded cmyk_as_rgb(const Decoded& cmyk, bool inverted) {
  Decoded rgb{cmyk.height, cmyk.width, 3, std::vector<uint8_t>(static_cast<size_t>(cmyk.height * cmyk.width * 3))};
  for (int64_t i = 0; i < cmyk.height * cmyk.width; ++i) {
    const uint8_t* p = cmyk.bytes.data() + i * 4;
    const int k = inverted ? p[3] : 255 - p[3];
    for (int c = 0; c < 3; ++c) {
      const int left = inverted ? p[c] : 255 - p[c];  // the share of white the ink leaves
      rgb.bytes[static_cast<size_t>(i * 3 + c)] = static_cast<uint8_t>((left * k + 127) / 255);
    }
  }
  return rgb;
}

// libjpeg's errors likewise: its message formatted, then a longjmp out of the decoder.
struct JpegError {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};
void jpeg_fail(j_common_ptr jpeg) {
  auto* error = reinterpret_cast<JpegError*>(jpeg->err);
  (*jpeg->err->format_message)(jpeg, error->message);
  std::longjmp(error->jump, 1);
}
void jpeg_ignore_message(j_common_ptr, int) {}

// Decodes into `d`, with libjpeg's longjmp kept inside this frame as png_read_into does.
bool jpeg_read_into(std::FILE* f, Decoded& d, JpegError& error) {
  jpeg_decompress_struct jpeg;
  jpeg.err = jpeg_std_error(&error.manager);
  error.manager.error_exit = jpeg_fail;
  error.manager.emit_message = jpeg_ignore_message;
  if (setjmp(error.jump)) {
    jpeg_destroy_decompress(&jpeg);
    return false;
  }
  jpeg_create_decompress(&jpeg);
  jpeg.mem->max_memory_to_use = kMaxDecoderBytes;  // a progressive image's buffers are sized by its header
  jpeg_stdio_src(&jpeg, f);
  jpeg_read_header(&jpeg, TRUE);
  // Checked before the decoder sizes anything by the header's claim.
  if (static_cast<int64_t>(jpeg.image_width) * jpeg.image_height > kMaxPixels) {
    std::snprintf(error.message, sizeof error.message, "%u x %u pixels, more than this reader takes", jpeg.image_width,
                  jpeg.image_height);
    jpeg_destroy_decompress(&jpeg);
    return false;
  }
  // Grey stays grey, CMYK (and YCCK) is read as such and made RGB below, the rest is RGB.
  const bool cmyk = jpeg.jpeg_color_space == JCS_CMYK || jpeg.jpeg_color_space == JCS_YCCK;
  jpeg.out_color_space = jpeg.jpeg_color_space == JCS_GRAYSCALE ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(&jpeg);
  d.width = jpeg.output_width;
  d.height = jpeg.output_height;
  d.channels = jpeg.output_components;
  d.bytes.resize(static_cast<size_t>(d.height * d.width * d.channels));
  while (jpeg.output_scanline < jpeg.output_height) {
    JSAMPROW row = d.bytes.data() + static_cast<int64_t>(jpeg.output_scanline) * d.width * d.channels;
    jpeg_read_scanlines(&jpeg, &row, 1);
  }
  const bool inverted = jpeg.saw_Adobe_marker;  // Adobe's CMYK is stored inverted
  jpeg_finish_decompress(&jpeg);
  jpeg_destroy_decompress(&jpeg);
  if (d.channels == 4) d = cmyk_as_rgb(d, inverted);
  return true;
}

Decoded decode_jpeg(const std::string& path) {
  File f = open_image(path);
  Decoded d;
  JpegError error;
  DT_USER_CHECK(jpeg_read_into(f.get(), d, error), "{}: not a readable JPEG image ({})", path, error.message);
  return d;
}

std::string lower_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

// The decoded pixels in `channels` (1 or 3): grey from colour by ITU-R 601 luma in PIL's
// integer form (its "L", which Keras's loader uses), colour from grey by repeating it; alpha
// dropped. Bytes throughout: a large image costs no float copy.
std::vector<uint8_t> in_channels(const Decoded& d, int64_t channels) {
  const int64_t n = d.height * d.width;
  std::vector<uint8_t> out(static_cast<size_t>(n * channels));
  const bool colour = d.channels >= 3;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = d.bytes.data() + i * d.channels;
    if (channels == 1)
      out[static_cast<size_t>(i)] = colour ? static_cast<uint8_t>((p[0] * 19595 + p[1] * 38470 + p[2] * 7471 + 0x8000) >> 16) : p[0];
    else
      for (int64_t c = 0; c < 3; ++c) out[static_cast<size_t>(i * 3 + c)] = colour ? p[c] : p[0];
  }
  return out;
}

// Bilinear resampling of (h, w, c) bytes to (H, W, c), half-pixel centres; rounded to bytes.
void resize_into(const std::vector<uint8_t>& in, int64_t h, int64_t w, int64_t c, int64_t H, int64_t W,
                 std::vector<uint8_t>& out) {
  const size_t first = out.size();
  out.resize(first + static_cast<size_t>(H * W * c));
  uint8_t* o = out.data() + first;
  const auto source = [](int64_t i, int64_t from, int64_t to, int64_t& lo, int64_t& hi, float& t) {
    const float x = std::max(0.0f, (static_cast<float>(i) + 0.5f) * static_cast<float>(from) / static_cast<float>(to) - 0.5f);
    lo = std::min(static_cast<int64_t>(x), from - 1);
    hi = std::min(lo + 1, from - 1);
    t = x - static_cast<float>(lo);
  };
  for (int64_t y = 0; y < H; ++y) {
    int64_t y0, y1;
    float ty;
    source(y, h, H, y0, y1, ty);
    for (int64_t x = 0; x < W; ++x) {
      int64_t x0, x1;
      float tx;
      source(x, w, W, x0, x1, tx);
      for (int64_t k = 0; k < c; ++k) {
        const auto at = [&](int64_t yy, int64_t xx) { return static_cast<float>(in[static_cast<size_t>((yy * w + xx) * c + k)]); };
        const float top = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * tx;
        const float bottom = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * tx;
        const float v = top + (bottom - top) * ty;
        o[(y * W + x) * c + k] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
}

}  // namespace

bool is_image_file(const std::string& path) {
  const std::string ext = lower_extension(path);
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

void read_image_file(const std::string& path, const Shape& shape, std::vector<uint8_t>& out) {
  DT_CHECK(shape.rank() == 3 && (shape[2] == 1 || shape[2] == 3), "image shape {}", shape.str());
  const Decoded d = lower_extension(path) == ".png" ? decode_png(path) : decode_jpeg(path);
  DT_USER_CHECK(d.width > 0 && d.height > 0, "{}: an image of no pixels", path);
  const int64_t channels = shape[2];
  if (d.height == shape[0] && d.width == shape[1] && d.channels == channels) {
    out.insert(out.end(), d.bytes.begin(), d.bytes.end());
    return;
  }
  const std::vector<uint8_t> converted = in_channels(d, channels);
  if (d.height == shape[0] && d.width == shape[1]) {
    out.insert(out.end(), converted.begin(), converted.end());
    return;
  }
  resize_into(converted, d.height, d.width, channels, shape[0], shape[1], out);
}

}  // namespace distrain
