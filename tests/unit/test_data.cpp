// IDX reading (valid, gzipped, truncated, wrong magic), synthetic data, the loader's
// sharding, shuffling and resumption.
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/backend/backend.hpp"
#include "datasets/idx.hpp"
#include "datasets/loader.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> idx_images(uint32_t n, uint32_t rows, uint32_t cols) {
  std::vector<uint8_t> d{0, 0, 8, 3};
  for (uint32_t v : {n, rows, cols})
    for (int s = 24; s >= 0; s -= 8) d.push_back(static_cast<uint8_t>(v >> s));
  for (uint32_t i = 0; i < n * rows * cols; ++i) d.push_back(static_cast<uint8_t>(i));
  return d;
}

std::vector<uint8_t> idx_labels(uint32_t n) {
  std::vector<uint8_t> d{0, 0, 8, 1};
  for (int s = 24; s >= 0; s -= 8) d.push_back(static_cast<uint8_t>(n >> s));
  for (uint32_t i = 0; i < n; ++i) d.push_back(static_cast<uint8_t>(i % 10));
  return d;
}

void write(const fs::path& p, const std::vector<uint8_t>& d, bool gzip = false) {
  if (gzip) {
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, d.data(), static_cast<unsigned>(d.size()));
    gzclose(f);
  } else {
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(d.data()), static_cast<std::streamsize>(d.size()));
  }
}

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("distrain_test_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

}  // namespace

TEST_CASE("IDX: plain and gzipped files read back, bad files are named errors") {
  const fs::path dir = temp_dir("idx");
  write(dir / "train-images-idx3-ubyte", idx_images(5, 3, 2));
  write(dir / "train-labels-idx1-ubyte.gz", idx_labels(5), true);
  const Dataset d = read_idx_split(dir, "train");
  CHECK(d.size() == 5);
  CHECK(d.example_shape == Shape{3, 2, 1});
  CHECK(d.pixels[7] == 7);
  CHECK(d.labels[4] == 4);

  auto truncated = idx_images(5, 3, 2);
  truncated.resize(truncated.size() - 3);
  write(dir / "train-images-idx3-ubyte", truncated);
  CHECK_THROWS_WITH_AS(read_idx_split(dir, "train"), doctest::Contains("(truncated)"), UserError);

  auto magic = idx_images(5, 3, 2);
  magic[3] = 1;
  write(dir / "train-images-idx3-ubyte", magic);
  CHECK_THROWS_WITH_AS(read_idx_split(dir, "train"), doctest::Contains("not an IDX image file"), UserError);

  write(dir / "train-images-idx3-ubyte", idx_images(4, 3, 2));
  CHECK_THROWS_WITH_AS(read_idx_split(dir, "train"), doctest::Contains("5 labels for 4 images"), UserError);

  fs::remove(dir / "train-images-idx3-ubyte");
  CHECK_THROWS_WITH_AS(read_idx_split(dir, "train"), doctest::Contains("train-images-idx3-ubyte[.gz]: not found"), UserError);

  // A gzip file cut in the middle of its stream.
  write(dir / "train-images-idx3-ubyte.gz", idx_images(500, 28, 28), true);
  const auto size = fs::file_size(dir / "train-images-idx3-ubyte.gz");
  fs::resize_file(dir / "train-images-idx3-ubyte.gz", size / 2);
  CHECK_THROWS_AS(read_idx_split(dir, "train"), UserError);
}

TEST_CASE("missing dataset folder says how to install it") {
  DataSpec spec;
  spec.path = "/nonexistent/fashion";
  CHECK_THROWS_WITH_AS(load_dataset(spec, 1), doctest::Contains("apt-get install dataset-fashion-mnist"), UserError);
}

TEST_CASE("synthetic data is reproducible from the seed") {
  DataSpec spec;
  spec.dataset = "synthetic";
  spec.train_examples = 50;
  const Splits a = load_dataset(spec, 3), b = load_dataset(spec, 3), c = load_dataset(spec, 4);
  CHECK(a.train.pixels == b.train.pixels);
  CHECK(a.train.pixels != c.train.pixels);
  CHECK(a.test.size() == 512);
}

// data.validation_split as Keras's fit takes it: the last share of the training examples,
// before shuffling, validates in place of the test split.
TEST_CASE("validation_split holds out the training split's last examples") {
  DataSpec spec;
  spec.dataset = "synthetic";
  spec.train_examples = 40;
  const Splits whole = load_dataset(spec, 3);
  spec.validation_split = 0.25;
  const Splits held = load_dataset(spec, 3);
  CHECK(held.train.size() == 30);
  CHECK(held.test.size() == 10);
  const int64_t per = spec.image_shape.numel();
  CHECK(held.train.pixels == std::vector<uint8_t>(whole.train.pixels.begin(), whole.train.pixels.begin() + 30 * per));
  CHECK(held.test.pixels == std::vector<uint8_t>(whole.train.pixels.begin() + 30 * per, whole.train.pixels.end()));
  CHECK(held.test.labels == std::vector<int32_t>(whole.train.labels.begin() + 30, whole.train.labels.end()));
  spec.validation_split = 0.999;
  CHECK_THROWS_WITH_AS(load_dataset(spec, 3), doctest::Contains("data.validation_split 0.999 leaves no example to train on"),
                       UserError);
}

TEST_CASE("loader: replicas get distinct slices, every example once per epoch, partial batch split evenly") {
  DataSpec spec;
  spec.dataset = "synthetic";
  spec.train_examples = 23;
  spec.image_shape = Shape{1, 1, 1};
  Dataset d = load_dataset(spec, 1).train;
  for (int64_t i = 0; i < d.size(); ++i) d.pixels[static_cast<size_t>(i)] = static_cast<uint8_t>(i);  // value = index

  Loader loader(d, LoaderSpec{4, 2, true, false, 7});
  CHECK(loader.batches_per_epoch() == 3);
  loader.start(0);
  std::multiset<int> seen;
  std::vector<std::vector<float>> epoch0;
  while (auto b = loader.next()) {
    if (b->index < 2) {
      CHECK(b->global_count == 8);
      CHECK(b->replicas[0].count == 4);
      CHECK(b->replicas[1].count == 4);
    } else {
      CHECK(b->global_count == 7);
      CHECK(b->replicas[0].count == 4);
      CHECK(b->replicas[1].count == 3);
    }
    for (const auto& s : b->replicas) {
      for (float v : s.images) seen.insert(static_cast<int>(v));
      epoch0.push_back(s.images);
    }
  }
  CHECK(seen.size() == 23);
  CHECK(std::set<int>(seen.begin(), seen.end()).size() == 23);

  // Resuming epoch 0 at batch 1 yields the same batches as the uninterrupted pass.
  loader.start(0, 1);
  auto b1 = loader.next();
  REQUIRE(b1);
  CHECK(b1->index == 1);
  CHECK(b1->replicas[0].images == epoch0[2]);

  // Another epoch has another order; drop_remainder drops the partial batch.
  loader.start(1);
  CHECK(loader.next()->replicas[0].images != epoch0[0]);
  Loader dropping(d, LoaderSpec{4, 2, false, true, 7});
  CHECK(dropping.batches_per_epoch() == 2);
}

}  // namespace distrain::test

namespace distrain::test {
TEST_CASE("loader: a worker materialises only its own replicas' slices, the same ones as the whole view") {
  DataSpec spec;
  spec.dataset = "synthetic";
  spec.train_examples = 30;
  spec.image_shape = Shape{1, 1, 1};
  Dataset d = load_dataset(spec, 1).train;
  for (int64_t i = 0; i < d.size(); ++i) d.pixels[static_cast<size_t>(i)] = static_cast<uint8_t>(i);
  Loader all(d, LoaderSpec{4, 4, true, false, 3});
  LoaderSpec part{4, 4, true, false, 3};
  part.first_replica = 2;
  part.local_replicas = 2;
  Loader mine(d, part);
  all.start(0);
  mine.start(0);
  while (auto a = all.next()) {
    auto m = mine.next();
    REQUIRE(m);
    CHECK(m->global_count == a->global_count);
    REQUIRE(m->replicas.size() == 2);
    CHECK(m->replicas[0].images == a->replicas[2].images);
    CHECK(m->replicas[1].labels == a->replicas[3].labels);
  }
}

TEST_CASE("loader: with indices_only the slices carry the examples' indices and labels, no images") {
  DataSpec data;
  data.dataset = "synthetic";
  data.train_examples = 23;
  data.image_shape = Shape{1, 1, 3};
  const Dataset d = load_dataset(data, 1).train;
  LoaderSpec spec{4, 2, true, false, 7};
  Loader full(d, spec);
  spec.indices_only = true;
  Loader indexed(d, spec);
  full.start(1);
  indexed.start(1);
  while (auto a = full.next()) {
    auto b = indexed.next();
    REQUIRE(b);
    for (size_t r = 0; r < a->replicas.size(); ++r) {
      const ReplicaSlice &x = a->replicas[r], &y = b->replicas[r];
      CHECK(y.images.empty());
      CHECK(y.labels == x.labels);
      REQUIRE(static_cast<int64_t>(y.indices.size()) == x.count);
      for (int64_t i = 0; i < x.count; ++i)
        for (int64_t j = 0; j < 3; ++j)
          CHECK(x.images[static_cast<size_t>(i * 3 + j)] == d.pixels[static_cast<size_t>(y.indices[static_cast<size_t>(i)] * 3 + j)]);
    }
  }
  CHECK_FALSE(indexed.next());
}

TEST_CASE("cpu gather_examples: rows of uint8, float32 and int32 tables, rows out of range refused") {
  Backend& be = backend_for(Device{});
  std::vector<uint8_t> bytes{1, 2, 3, 4, 5, 6};
  std::vector<float> floats{1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f};
  std::vector<int32_t> labels{7, 8, 9}, rows{2, 0, 2};
  const Tensor index{rows.data(), Shape{3}, DType::i32, Device{}};
  std::vector<float> out(6);
  const Tensor out_t{out.data(), Shape{3, 2}, DType::f32, Device{}};
  be.gather_examples(Tensor{bytes.data(), Shape{3, 2}, DType::u8, Device{}}, index, out_t);
  CHECK(out == std::vector<float>{5, 6, 1, 2, 5, 6});
  be.gather_examples(Tensor{floats.data(), Shape{3, 2}, DType::f32, Device{}}, index, out_t);
  CHECK(out == std::vector<float>{5.5f, 6.5f, 1.5f, 2.5f, 5.5f, 6.5f});
  std::vector<int32_t> got(3);
  be.gather_examples(Tensor{labels.data(), Shape{3}, DType::i32, Device{}}, index, Tensor{got.data(), Shape{3}, DType::i32, Device{}});
  CHECK(got == std::vector<int32_t>{9, 7, 9});
  rows[1] = 3;
  CHECK_THROWS(be.gather_examples(Tensor{labels.data(), Shape{3}, DType::i32, Device{}}, index,
                                  Tensor{got.data(), Shape{3}, DType::i32, Device{}}));
}

}  // namespace distrain::test
