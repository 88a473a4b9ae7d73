// Folders of PNG and JPEG images (data.dataset = "image_folder"): files written here with
// libpng and libjpeg, as an image library would write them. What decodes to which bytes,
// grey and colour conversion, resizing, class folders and splits, each bad folder's
// one-line error, and a CNN trained on an image folder against the same pixels in memory.
// jpeglib.h uses FILE and size_t without including their headers.
#include <cstddef>
#include <cstdio>

#include <jpeglib.h>
#include <png.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/io/checkpoint.hpp"
#include "core/io/recipe.hpp"
#include "core/train/trainer.hpp"
#include "datasets/dataset.hpp"
#include "datasets/image_file.hpp"
#include "datasets/image_folder.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / "distrain_test_images" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A PNG of `channels` (1 grey, 2 grey + alpha, 3 RGB, 4 RGBA) at 8 or 16 bits; 16-bit
// samples are each byte repeated (v * 257), so they cut back to v.
void write_png(const fs::path& path, int width, int height, int channels, const std::vector<uint8_t>& pixels, int bits = 8) {
  fs::create_directories(path.parent_path());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_init_io(png, f);
  const int type[] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB, PNG_COLOR_TYPE_RGB_ALPHA};
  png_set_IHDR(png, info, width, height, bits, type[channels], PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  const int samples = width * channels;
  std::vector<uint8_t> row(static_cast<size_t>(samples * bits / 8));
  for (int y = 0; y < height; ++y) {
    for (int i = 0; i < samples; ++i) {
      const uint8_t v = pixels[static_cast<size_t>(y * samples + i)];
      if (bits == 8) row[static_cast<size_t>(i)] = v;
      else row[static_cast<size_t>(2 * i)] = row[static_cast<size_t>(2 * i + 1)] = v;
    }
    png_write_row(png, row.data());
  }
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  std::fclose(f);
}

void write_jpeg(const fs::path& path, int width, int height, int channels, const std::vector<uint8_t>& pixels) {
  fs::create_directories(path.parent_path());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f);
  jpeg_compress_struct jpeg;
  jpeg_error_mgr error;
  jpeg.err = jpeg_std_error(&error);
  jpeg_create_compress(&jpeg);
  jpeg_stdio_dest(&jpeg, f);
  jpeg.image_width = static_cast<JDIMENSION>(width);
  jpeg.image_height = static_cast<JDIMENSION>(height);
  jpeg.input_components = channels;
  jpeg.in_color_space = channels == 1 ? JCS_GRAYSCALE : channels == 4 ? JCS_CMYK : JCS_RGB;
  jpeg_set_defaults(&jpeg);
  jpeg_set_quality(&jpeg, 100, TRUE);
  for (int c = 0; c < jpeg.num_components; ++c) jpeg.comp_info[c].h_samp_factor = jpeg.comp_info[c].v_samp_factor = 1;
  jpeg_start_compress(&jpeg, TRUE);
  while (jpeg.next_scanline < jpeg.image_height) {
    auto* row = const_cast<uint8_t*>(pixels.data() + static_cast<size_t>(jpeg.next_scanline) * width * channels);
    jpeg_write_scanlines(&jpeg, &row, 1);
  }
  jpeg_finish_compress(&jpeg);
  jpeg_destroy_compress(&jpeg);
  std::fclose(f);
}

std::vector<uint8_t> read(const fs::path& path, const Shape& shape) {
  std::vector<uint8_t> out;
  read_image_file(path.string(), shape, out);
  return out;
}

std::vector<uint8_t> ramp(int n, int step) {
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<uint8_t>((i * step) % 256);
  return v;
}

}  // namespace

TEST_CASE("image files: PNG bytes as written, in any bit depth and channels, grey and colour converted, JPEG near") {
  const fs::path dir = fresh_dir("decode");
  const std::vector<uint8_t> grey = ramp(6 * 4, 11), rgb = ramp(6 * 4 * 3, 7);
  write_png(dir / "g.png", 6, 4, 1, grey);
  write_png(dir / "g16.PNG", 6, 4, 1, grey, 16);
  write_png(dir / "rgb.png", 6, 4, 3, rgb);
  CHECK(read(dir / "g.png", Shape{4, 6, 1}) == grey);
  CHECK(read(dir / "g16.PNG", Shape{4, 6, 1}) == grey);
  CHECK(read(dir / "rgb.png", Shape{4, 6, 3}) == rgb);
  // Alpha dropped; grey repeated into RGB; RGB to grey by ITU-R 601 luma.
  std::vector<uint8_t> rgba;
  for (size_t i = 0; i < grey.size(); ++i) rgba.insert(rgba.end(), {rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2], 17});
  write_png(dir / "rgba.png", 6, 4, 4, rgba);
  CHECK(read(dir / "rgba.png", Shape{4, 6, 3}) == rgb);
  const std::vector<uint8_t> grey_as_rgb = read(dir / "g.png", Shape{4, 6, 3});
  for (size_t i = 0; i < grey.size(); ++i) CHECK((grey_as_rgb[3 * i] == grey[i] && grey_as_rgb[3 * i + 2] == grey[i]));
  const std::vector<uint8_t> luma = read(dir / "rgb.png", Shape{4, 6, 1});
  for (size_t i = 0; i < grey.size(); ++i)
    CHECK(luma[i] == (rgb[3 * i] * 19595 + rgb[3 * i + 1] * 38470 + rgb[3 * i + 2] * 7471 + 0x8000) >> 16);
  // JPEG is lossy: at quality 100 within a few levels of what was written, grey and colour.
  std::vector<uint8_t> smooth(8 * 8);
  for (int i = 0; i < 64; ++i) smooth[static_cast<size_t>(i)] = static_cast<uint8_t>(60 + (i % 8) * 10 + (i / 8) * 5);
  write_jpeg(dir / "s.jpg", 8, 8, 1, smooth);
  const std::vector<uint8_t> back = read(dir / "s.jpg", Shape{8, 8, 1});
  for (size_t i = 0; i < smooth.size(); ++i) CHECK(std::abs(int(back[i]) - int(smooth[i])) <= 3);
  std::vector<uint8_t> colour;
  for (uint8_t v : smooth) colour.insert(colour.end(), {v, static_cast<uint8_t>(255 - v), 128});
  write_jpeg(dir / "c.jpeg", 8, 8, 3, colour);
  const std::vector<uint8_t> cback = read(dir / "c.jpeg", Shape{8, 8, 3});
  for (size_t i = 0; i < colour.size(); ++i) CHECK(std::abs(int(cback[i]) - int(colour[i])) <= 4);
  // CMYK as Adobe stores it (inverted: 255 is no ink; libjpeg writes the Adobe marker): each
  // colour is what its ink and the black leave of white.
  std::vector<uint8_t> cmyk;
  for (int i = 0; i < 64; ++i) cmyk.insert(cmyk.end(), {255, 128, 0, 200});
  write_jpeg(dir / "cmyk.jpg", 8, 8, 4, cmyk);
  const std::vector<uint8_t> from_cmyk = read(dir / "cmyk.jpg", Shape{8, 8, 3});
  for (size_t i = 0; i < 64; ++i) {
    CHECK(std::abs(int(from_cmyk[3 * i]) - 200) <= 4);  // 255 x 200 / 255
    CHECK(std::abs(int(from_cmyk[3 * i + 1]) - 100) <= 4);
    CHECK(int(from_cmyk[3 * i + 2]) <= 4);
  }
}

// Bilinear with half-pixel centres (tf.image.resize): 1 x 2 to 1 x 4 interpolates at 1/4
// and 3/4; 4 x 4 to 2 x 2 averages each 2 x 2 block's centre.
TEST_CASE("image files: resized bilinearly with half-pixel centres") {
  const fs::path dir = fresh_dir("resize");
  write_png(dir / "two.png", 2, 1, 1, {0, 100});
  CHECK(read(dir / "two.png", Shape{1, 4, 1}) == std::vector<uint8_t>{0, 25, 75, 100});
  std::vector<uint8_t> big(16);
  for (int i = 0; i < 16; ++i) big[static_cast<size_t>(i)] = static_cast<uint8_t>(10 * i);
  write_png(dir / "big.png", 4, 4, 1, big);
  // Output (0, 0) samples (0.5, 0.5): the mean of 0, 10, 40, 50.
  CHECK(read(dir / "big.png", Shape{2, 2, 1}) == std::vector<uint8_t>{25, 45, 105, 125});
}

TEST_CASE("image files: what is not a readable PNG or JPEG is named, one line") {
  const fs::path dir = fresh_dir("bad");
  std::ofstream(dir / "text.png") << "not an image";
  CHECK_THROWS_WITH_AS(read(dir / "text.png", Shape{2, 2, 1}), doctest::Contains("text.png: not a readable PNG image"),
                       UserError);
  std::ofstream(dir / "text.jpg") << "not an image either";
  CHECK_THROWS_WITH_AS(read(dir / "text.jpg", Shape{2, 2, 1}), doctest::Contains("text.jpg: not a readable JPEG image"),
                       UserError);
  write_png(dir / "whole.png", 6, 4, 1, ramp(24, 3));
  std::string bytes;
  {
    std::ifstream in(dir / "whole.png", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  std::ofstream(dir / "cut.png", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  CHECK_THROWS_WITH_AS(read(dir / "cut.png", Shape{4, 6, 1}), doctest::Contains("cut.png: not a readable PNG image"),
                       UserError);
  CHECK_THROWS_WITH_AS(read(dir / "none.png", Shape{4, 6, 1}), doctest::Contains("none.png: cannot open"), UserError);
  CHECK(is_image_file("a/B.JPEG"));
  CHECK_FALSE(is_image_file("a/b.gif"));
}

TEST_CASE("image folders: classes by folder name, sorted, validated on a test folder or a held-out share") {
  const fs::path dir = fresh_dir("folder");
  for (int i = 0; i < 5; ++i) write_png(dir / "train" / "cat" / fmt::format("c{}.png", i), 3, 3, 1, ramp(9, 10 + i));
  for (int i = 0; i < 3; ++i) write_png(dir / "train" / "ant" / "deeper" / fmt::format("a{}.png", i), 3, 3, 3, ramp(27, 3 + i));
  std::ofstream(dir / "train" / "cat" / "notes.txt") << "not an example";
  write_png(dir / "test" / "ant" / "a.png", 3, 3, 1, ramp(9, 1));
  write_png(dir / "test" / "cat" / "c.png", 3, 3, 1, ramp(9, 2));
  DataSpec spec;
  spec.dataset = "image_folder";
  spec.path = (dir / "train").string();
  spec.test_path = (dir / "test").string();
  spec.image_shape = Shape{3, 3, 1};
  const Splits s = load_dataset(spec, 7);
  CHECK(s.train.class_names == std::vector<std::string>{"ant", "cat"});
  CHECK(s.train.num_classes == 2);
  CHECK(s.train.labels == std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 1});
  CHECK(s.train.pixels.size() == 8 * 9);
  CHECK(std::vector<uint8_t>(s.train.pixels.begin() + 3 * 9, s.train.pixels.begin() + 4 * 9) == ramp(9, 10));  // cat/c0.png
  CHECK(s.test.labels == std::vector<int32_t>{0, 1});
  // Without a test folder: validation_split holds out a share, drawn by the seed.
  spec.test_path.clear();
  spec.validation_split = 0.25;
  const Splits held = load_dataset(spec, 7);
  CHECK(held.train.size() == 6);
  CHECK(held.test.size() == 2);
  CHECK(load_dataset(spec, 7).test.pixels == held.test.pixels);
  // Errors: a class folder without images, one class, test classes that differ.
  fs::create_directories(dir / "train" / "empty");
  CHECK_THROWS_WITH_AS(load_dataset(spec, 7), doctest::Contains("the class folder empty holds no PNG or JPEG file"), UserError);
  fs::remove(dir / "train" / "empty");
  spec.path = (dir / "train" / "cat").string();
  CHECK_THROWS_WITH_AS(load_dataset(spec, 7), doctest::Contains("0 class folder(s); an image folder holds one folder per class"),
                       UserError);
  spec.path = (dir / "train").string();
  spec.validation_split = 0;
  write_png(dir / "test" / "dog" / "d.png", 3, 3, 1, ramp(9, 5));
  spec.test_path = (dir / "test").string();
  CHECK_THROWS_WITH_AS(load_dataset(spec, 7), doctest::Contains("has the class folders [ant, cat, dog]"), UserError);
  fs::remove_all(dir / "test" / "dog");
  std::ofstream(dir / "train" / "cat" / "broken.png") << "garbage";
  CHECK_THROWS_WITH_AS(load_dataset(spec, 7), doctest::Contains("broken.png: not a readable PNG image"), UserError);
}

TEST_CASE("image folders: the recipe's keys, the model's input shape by default, and something to validate on") {
  const std::string model = "\n[model]\ninput_shape = [4, 4, 1]\nlayers = [{ type = \"flatten\" }, { type = \"dense\", units = 2 }]\n";
  const Recipe r = parse_recipe("[data]\ndataset = \"image_folder\"\npath = \"x\"\nvalidation_split = 0.2" + model, "i.toml");
  CHECK(r.data.image_shape == Shape{4, 4, 1});
  CHECK_THROWS_WITH_AS(parse_recipe("[data]\ndataset = \"image_folder\"\npath = \"x\"" + model, "i.toml"),
                       doctest::Contains("an image_folder with nothing to validate on"), UserError);
  CHECK(parse_recipe("[data]\ndataset = \"image_folder\"\npath = \"x\"\n[train]\nvalidate = false" + model, "i.toml").data.path == "x");
  CHECK_THROWS_WITH_AS(parse_recipe("[data]\ndataset = \"image_folder\"\nvalidation_split = 0.2" + model, "i.toml"),
                       doctest::Contains("data.path: image_folder needs the folder of class folders"), UserError);
  CHECK_THROWS_WITH_AS(
      parse_recipe("[data]\ndataset = \"image_folder\"\npath = \"x\"\nvalidation_split = 0.2\nimage_shape = [4, 4, 2]" + model, "i.toml"),
      doctest::Contains("data.image_shape: expected [height, width, channels] with 1 (grey) or 3 (RGB) channels"), UserError);
  CHECK_THROWS_WITH_AS(parse_recipe("[data]\ndataset = \"image_folder\"\npath = \"x\"\ntest_path = \"y\"\nvalidation_split = 0.2" + model,
                                    "i.toml"),
                       doctest::Contains("and data.test_path both choose what validates"), UserError);
}

// The synthetic data set written out as PNG files in class folders trains a CNN to the same
// test accuracy as the same pixels held in memory (only the order of the files differs).
TEST_CASE("image folders: a CNN trained on PNG files reaches the accuracy of the same pixels in memory") {
  const fs::path dir = fresh_dir("train");
  const std::string common = R"(
[model]
input_shape = [8, 8, 1]
layers = [
  { type = "rescaling", scale = 0.00392156862745098 },
  { type = "conv2d", filters = 4, kernel_size = 3, padding = "same", activation = "relu" },
  { type = "flatten" },
  { type = "dense", units = 4 },
]
[strategy]
per_replica_batch = 32
[train]
epochs = 2
tensorboard = false
)";
  const Recipe memory = parse_recipe(
      "name = \"memory\"\nseed = 3\n[data]\ndataset = \"synthetic\"\ntrain_examples = 512\ntest_examples = 128\nnum_classes = 4\n"
      "image_shape = [8, 8, 1]" + common, "memory.toml");
  const Splits data = load_dataset(memory.data, memory.seed);
  for (const auto& [split, set] : {std::pair{"train", &data.train}, {"test", &data.test}})
    for (int64_t i = 0; i < set->size(); ++i) {
      const std::vector<uint8_t> px(set->pixels.begin() + i * 64, set->pixels.begin() + (i + 1) * 64);
      write_png(dir / split / fmt::format("class{}", set->labels[static_cast<size_t>(i)]) / fmt::format("{:04}.png", i), 8, 8, 1, px);
    }
  const Recipe folder = parse_recipe(fmt::format("name = \"folder\"\nseed = 3\n[data]\ndataset = \"image_folder\"\npath = \"{}\"\n"
                                                 "test_path = \"{}\"", (dir / "train").string(), (dir / "test").string()) + common,
                                     "folder.toml");
  TrainOptions options;
  options.progress.style = ProgressStyle::none;
  options.run_dir = (dir / "run_memory").string();
  const TrainSummary a = train(memory, options);
  options.run_dir = (dir / "run_folder").string();
  const TrainSummary b = train(folder, options);
  MESSAGE("test accuracy: in memory " << a.val_accuracy << ", from PNG files " << b.val_accuracy);
  CHECK(a.val_accuracy > 0.9);
  CHECK(std::abs(a.val_accuracy - b.val_accuracy) <= 0.005);
  CHECK(read_checkpoint_header(b.last_checkpoint).class_names == std::vector<std::string>{"class0", "class1", "class2", "class3"});
  // Resuming on folders whose classes are named otherwise would give the indices other meanings.
  fs::rename(dir / "train" / "class0", dir / "train" / "class9");
  fs::rename(dir / "test" / "class0", dir / "test" / "class9");
  Recipe longer = folder;
  longer.train.epochs = 3;
  CHECK_THROWS_WITH_AS(train(longer, options), doctest::Contains("trained on the classes [class0, class1, class2, class3]"),
                       UserError);
}

}  // namespace distrain::test
