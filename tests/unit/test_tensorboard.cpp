// TensorBoard event files: CRC32C and TFRecord framing, Event encoding (bytes as
// TensorFlow's protobuf writes them), and the events of a run stopped by a step cap,
// crashed after a checkpoint and resumed: every step once, values as an uninterrupted run's.
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>

#include "core/io/tensorboard.hpp"
#include "core/io/tfrecord.hpp"
#include "core/train/tensorboard_log.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

namespace fs = std::filesystem;

std::string hex(std::string_view bytes) {
  std::string out;
  for (char c : bytes) out += fmt::format("{:02x}", static_cast<uint8_t>(c));
  return out;
}

// Every scalar of a run folder's event files in file order, as "<train|validation>/<tag>"
// -> [(step, value)].
std::map<std::string, std::vector<std::pair<int64_t, float>>> read_scalars(const fs::path& run) {
  std::map<std::string, std::vector<std::pair<int64_t, float>>> out;
  for (const char* sub : {"train", "validation"})
    for (const auto& f : list_event_files((run / sub).string()))
    for (const auto& r : read_tfrecords(f).records) {
      const Event e = decode_event(r, f);
      for (const auto& [tag, value] : e.scalars) out[fmt::format("{}/{}", sub, tag)].emplace_back(e.step, value);
    }
  return out;
}

const char* kRecipe = R"(
name = "tb"
seed = 2
[data]
dataset = "synthetic"
train_examples = 300
test_examples = 64
image_shape = [6, 6, 1]
[model]
input_shape = [6, 6, 1]
layers = [
  { type = "rescaling", scale = 0.00392156862745098 },
  { type = "flatten" },
  { type = "dense", units = 10 },
]
[strategy]
per_replica_batch = 32
[train]
epochs = 3
tensorboard_every_steps = 1
[checkpoint]
every_epochs = 0
every_steps = 8
)";

TrainOptions quiet(const fs::path& dir, int64_t crash_after_step = 0) {
  TrainOptions o;
  o.run_dir = dir.string();
  o.out = std::fopen("/dev/null", "w");
  o.crash_after_step = crash_after_step;
  return o;
}

}  // namespace

TEST_CASE("crc32c: Castagnoli check values, masked as TensorFlow masks them") {
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);  // RFC 3720 B.4
  CHECK(crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  const uint32_t c = crc32c("123456789");
  CHECK(masked_crc32c("123456789") == ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST_CASE("crc32c: the crc32 instruction's path equals the table's at every length and alignment") {
  std::string bytes(4096 + 64, '\0');
  uint32_t x = 12345;
  for (char& b : bytes) b = static_cast<char>((x = x * 1103515245u + 12345u) >> 24);
  for (size_t offset = 0; offset < 9; ++offset)
    for (size_t length : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{63}, size_t{1000}, size_t{4096}}) {
      const std::string_view v(bytes.data() + offset, length);
      CHECK(crc32c(v) == crc32c_portable(v));
    }
  CHECK(crc32c_portable("123456789") == 0xE3069283u);
}

TEST_CASE("tensorboard: step losses reach the file within tensorboard_flush_seconds, before the epoch ends") {
  const fs::path dir = fs::temp_directory_path() / "distrain_tb_flush";
  auto batch_losses_on_disk = [&](double flush_seconds) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    TensorBoardLog log(dir.string(), TrainState{}, 1, flush_seconds);
    log.step(1, LossStats{2.0, 1, 4}, 0.1);
    log.step(2, LossStats{1.0, 1, 4}, 0.1);
    int found = 0;
    for (const std::string& record : read_tfrecords(list_event_files((dir / "train").string()).at(0)).records)
      for (const auto& [tag, value] : decode_event(record, "event").scalars) found += tag == "batch_loss";
    return found;
  };
  CHECK(batch_losses_on_disk(0.0) == 2);  // each written at once
  CHECK(batch_losses_on_disk(3600.0) == 0);  // buffered until an hour passes or the epoch ends
  fs::remove_all(dir);
}

TEST_CASE("tfrecord: records read back, a record cut short at the end is dropped, a corrupt one is an error") {
  const fs::path file = fs::temp_directory_path() / "distrain_test.tfrecord";
  const std::string frames = tfrecord_frame("first") + tfrecord_frame("") + tfrecord_frame(std::string(300, 'x'));
  CHECK(frames.size() == 3 * 16 + 5 + 300);
  std::ofstream(file, std::ios::binary) << frames;
  TFRecords r = read_tfrecords(file.string());
  CHECK(r.records == std::vector<std::string>{"first", "", std::string(300, 'x')});
  CHECK_FALSE(r.truncated);

  fs::resize_file(file, frames.size() - 1);
  r = read_tfrecords(file.string());
  CHECK(r.records.size() == 2);
  CHECK(r.truncated);

  std::string corrupt = frames;
  corrupt[12] ^= 1;  // a byte of the first record's data
  std::ofstream(file, std::ios::binary | std::ios::trunc) << corrupt;
  CHECK_THROWS_WITH_AS(read_tfrecords(file.string()), doctest::Contains("record 0 at byte 0 has a bad data CRC"), UserError);
}

TEST_CASE("tensorboard events: the bytes TensorFlow's protobuf writes, decoded back") {
  // From tensorboard.compat.proto.event_pb2.Event(...).SerializeToString().
  const Event scalar{1.0, 2, "", {{"a", 1.0f}}};
  CHECK(hex(encode_event(scalar)) == "09000000000000f03f10022a0a0a080a0161150000803f");
  CHECK(hex(encode_event(Event{1.5, 0, "brain.Event:2", {}})) == "09000000000000f83f1a0d627261696e2e4576656e743a32");

  const Event e{1.25e9, 123456789012, "", {{"loss", 0.25f}, {"val_accuracy", 0.875f}}};
  const Event d = decode_event(encode_event(e), "test");
  CHECK(d.wall_time == e.wall_time);
  CHECK(d.step == e.step);
  CHECK(d.scalars == e.scalars);
  CHECK_THROWS_WITH_AS(decode_event(encode_event(e).substr(0, 20), "cut"), doctest::Contains("cut: malformed event"), UserError);
}

TEST_CASE("tensorboard: a capped, crashed and resumed run shows every step once, as an uninterrupted run") {
  const Recipe recipe = parse_recipe(kRecipe, "tb.toml");
  const fs::path a = fs::temp_directory_path() / "distrain_tb_a", b = fs::temp_directory_path() / "distrain_tb_b";
  fs::remove_all(a);
  fs::remove_all(b);
  train(recipe, quiet(a));  // 10 steps per epoch (the last batch partial), 30 in all

  Recipe capped = recipe;
  capped.train.steps = 5;
  train(capped, quiet(b));      // reports the partial epoch 1 at step 5, saves ckpt-5
  train(recipe, quiet(b, 14));  // resumes at 5, writes epoch 1 (step 10) and steps to 14, crashes
  CHECK(list_checkpoints(b.string()).back() == (b / "ckpt-000008.h5").string());
  train(recipe, quiet(b));  // resumes at 8: steps 9..14 and epoch 1 again

  const auto full = read_scalars(a), resumed = read_scalars(b);
  CHECK(list_event_files((b / "train").string()).size() == 3);
  std::vector<int64_t> every_step(30);
  std::iota(every_step.begin(), every_step.end(), 1);
  const std::map<std::string, std::vector<int64_t>> steps_of{  // Keras's tags and steps
      {"train/batch_loss", every_step},           {"train/batch_accuracy", every_step},
      {"train/batch_learning_rate", every_step},  {"train/epoch_loss", {0, 1, 2}},
      {"train/epoch_accuracy", {0, 1, 2}},        {"train/epoch_learning_rate", {0, 1, 2}},
      {"train/epoch_images_per_sec", {0, 1, 2}},  {"validation/epoch_loss", {0, 1, 2}},
      {"validation/epoch_accuracy", {0, 1, 2}},   {"validation/evaluation_loss_vs_iterations", {10, 20, 30}},
      {"validation/evaluation_accuracy_vs_iterations", {10, 20, 30}}};
  REQUIRE(full.size() == steps_of.size());
  for (const auto& [tag, points] : full) {
    INFO(tag);
    std::vector<int64_t> steps, resumed_steps;
    for (const auto& [step, value] : points) steps.push_back(step);
    for (const auto& [step, value] : resumed.at(tag)) resumed_steps.push_back(step);
    CHECK(resumed_steps == steps);
    CHECK(steps == steps_of.at(tag));
    if (tag != "train/epoch_images_per_sec") CHECK(resumed.at(tag) == points);  // exact resume: the same values
  }
  CHECK(full.at("train/batch_learning_rate").back().second == full.at("train/epoch_learning_rate").back().second);

  TrainOptions fresh = quiet(b);
  fresh.fresh = true;
  Recipe quiet_tb = recipe;
  quiet_tb.train.tensorboard = false;
  train(quiet_tb, fresh);
  CHECK(read_scalars(b).empty());
}

}  // namespace distrain::test
