// Device memory: every buffer on a device counts, a budget (strategy.device_memory) stops
// an allocation past it with the device, what it was for and the bytes, and the
// high-water mark is kept for `bench`.
#include <filesystem>

#include "core/backend/backend.hpp"
#include "core/base/host_memory.hpp"
#include "core/io/recipe.hpp"
#include "core/strategy/strategy.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

// 16 inputs -> 4,096 -> 10: 110,602 float32 variables, 432 KiB (as many again for
// gradients, twice as many for Adam's slots); activations of 4,096 per example.
std::string wide_recipe(const std::string& budget) {
  return fmt::format(R"(
name = "wide"
[data]
dataset = "synthetic"
train_examples = 128
test_examples = 32
image_shape = [4, 4, 1]
[model]
input_shape = [4, 4, 1]
layers = [{{ type = "flatten" }}, {{ type = "dense", units = 4096 }}, {{ type = "dense", units = 10 }}]
[optimizer]
type = "adam"
[strategy]
device_memory = {}
[train]
steps = 2
validate = false
tensorboard = false
)",
                     budget);
}

// Puts cpu:0's budget back whatever a test left there: other tests share the device.
struct NoBudgetAfter {
  ~NoBudgetAfter() { cpu().memory().set_budget(0); }
};

}  // namespace

TEST_CASE("byte counts: binary and decimal units, bytes without one, and refusals") {
  CHECK(parse_byte_count("2GiB") == int64_t{2} << 30);
  CHECK(parse_byte_count("512 MiB") == int64_t{512} << 20);
  CHECK(parse_byte_count("1.5GB") == 1500000000);
  CHECK(parse_byte_count("4096") == 4096);
  CHECK(parse_byte_count("16kB") == 16000);
  for (const char* bad : {"", "GiB", "2 gibibytes", "-1MiB", "nan", "inf", "1e30TB", "2GiB extra"}) {
    INFO(bad);
    CHECK_FALSE(parse_byte_count(bad).has_value());
  }
}

TEST_CASE("device memory: buffers are counted while they live, the peak stays, a budget refuses with what and how much") {
  const NoBudgetAfter reset;
  DeviceMemory& memory = cpu().memory();
  const int64_t before = memory.in_use();
  memory.reset_peak();
  {
    const Buffer a(cpu(), Shape{1000});
    CHECK(memory.in_use() == before + 4000);
  }
  CHECK(memory.in_use() == before);
  CHECK(memory.peak() == before + 4000);
  memory.set_budget(before + 10000);
  static const std::string kWhat = "the test's buffers";
  const MemoryPurpose purpose(kWhat);
  const Buffer fits(cpu(), Shape{2000});
  // (Other tests' buffers still alive on cpu:0, `before`, count in the budget and in use.)
  const std::string message = before == 0 ? "device cpu:0: out of memory (strategy.device_memory = 9.77 KiB): allocating 7.81 "
                                            "KiB for the test's buffers ((10, 200) float32) with 7.81 KiB in use"
                                          : "allocating 7.81 KiB for the test's buffers ((10, 200) float32) with ";
  CHECK_THROWS_WITH_AS(Buffer(cpu(), Shape{10, 200}), doctest::Contains(message.c_str()), UserError);
  CHECK(memory.in_use() == before + 8000);  // the refused buffer took nothing
}

TEST_CASE("strategy.device_memory: a model whose optimizer state or activations do not fit is refused, naming them") {
  const NoBudgetAfter reset;
  CHECK(parse_recipe(wide_recipe("\"2GiB\""), "w.toml").strategy.device_memory == int64_t{2} << 30);
  CHECK_THROWS_WITH_AS(parse_recipe(wide_recipe("\"lots\""), "w.toml"),
                       doctest::Contains("w.toml:14: strategy.device_memory: expected a size such as \"2GiB\""), UserError);
  // Variables and gradients (864 KiB) fit in 1 MiB, Adam's slots then do not.
  CHECK_THROWS_WITH_AS(make_strategy(parse_recipe(wide_recipe("\"1MiB\""), "w.toml")),
                       doctest::Contains("for the optimizer's state"), UserError);
  // 2 MiB holds the model and its optimizer (1.69 MiB), not a batch of 64's activations.
  const std::string dir = (std::filesystem::temp_directory_path() / "distrain_device_memory").string();
  CHECK_THROWS_WITH_AS(train_from_text(wide_recipe("\"2MiB\""), dir), doctest::Contains("the activations of a batch of 64"),
                       UserError);
  // With room, it trains, and the high-water mark is at least what it holds.
  CHECK_NOTHROW(train_from_text(wide_recipe("\"64MiB\""), dir));
  CHECK(cpu().memory().peak() >= 4 * 110602 * 4);  // values, gradients, two Adam slots
  CHECK(cpu().memory().peak() <= 64 << 20);
  std::filesystem::remove_all(dir);
}

}  // namespace distrain::test
