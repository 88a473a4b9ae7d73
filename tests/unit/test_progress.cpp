// Progress output: the bar fitted to the terminal's width, plain lines for logs, nothing
// for none.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "core/train/progress.hpp"
#include "core/train/slow_phase.hpp"

namespace distrain::test {
namespace {

// Sets an environment variable for the scope of one test, then puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// What Progress prints over `epochs` epochs of `batches` batches.
std::string printed(ProgressOptions options, int64_t epochs, int64_t batches) {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  Progress progress(f, options, epochs, batches);
  const LossStats running{10.0, 3, 8};
  for (int64_t e = 0; e < epochs; ++e) {
    progress.begin_epoch(e);
    for (int64_t b = 1; b <= batches; ++b) progress.update(b, running, 1000.0, 0.1 * static_cast<double>(b));
    progress.end_epoch(EpochReport{e + 1, (e + 1) * batches, batches, running, {}, 0.001, 1000.0, 1.0});
  }
  std::string text(static_cast<size_t>(std::ftell(f)), '\0');
  std::rewind(f);
  REQUIRE(std::fread(text.data(), 1, text.size(), f) == text.size());
  std::fclose(f);
  return text;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("progress: the bar narrows to fit the width, then goes, and never cuts the text") {
  const std::string head = "Epoch 1/2  4/8", tail = " ETA 0:01 - loss: 0.5000";  // 14 + 24 columns
  CHECK(fit_bar_line(head, 4, 8, tail, 200) == head + " [===============>..............]" + tail);  // 30 cells at most
  CHECK(fit_bar_line(head, 4, 8, tail, 60) == head + " [=========>.........]" + tail);              // 60 - 38 - 3 = 19
  CHECK(fit_bar_line(head, 4, 8, tail, 60).size() == 60);
  CHECK(fit_bar_line(head, 8, 8, tail, 51) == head + " [==========]" + tail);  // the narrowest bar: 10 cells
  CHECK(fit_bar_line(head, 4, 8, tail, 50) == head + tail);
  CHECK(fit_bar_line(head, 4, 8, tail, 20) == head + tail);
}

TEST_CASE("progress: the width of a file that is no terminal comes from COLUMNS, else 80") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  {
    ScopedEnv columns("COLUMNS", "123");
    CHECK(terminal_columns(f) == 123);
  }
  {
    ScopedEnv columns("COLUMNS", "wide");
    CHECK(terminal_columns(f) == 80);
  }
  {
    ScopedEnv columns("COLUMNS", nullptr);
    CHECK(terminal_columns(f) == 80);
  }
  std::fclose(f);
}

TEST_CASE("progress: line style prints plain lines, about ten an epoch or every N batches, and one per epoch") {
  const std::string lines = printed({ProgressStyle::line, 0}, 2, 25);  // a line every 3 batches
  CHECK(lines.find('\r') == std::string::npos);
  CHECK(lines.find('\033') == std::string::npos);
  CHECK(count(lines, "epoch 1/2 batch ") == 8);  // 3, 6, ..., 24; the 25th is the epoch's line
  CHECK(lines.find("epoch 2/2 batch 24/25 - loss: 1.2500 - accuracy: 0.3750 - 1000 img/s - ETA 0:00\n") != std::string::npos);
  CHECK(count(lines, "epoch 1/2 step 25 - loss: 1.2500") == 1);
  CHECK(count(lines, "epoch 2/2 step 50 - loss: 1.2500") == 1);

  const std::string every = printed({ProgressStyle::line, 10}, 1, 25);
  CHECK(count(every, "\n") == 4);  // batches 10 and 20, then the epoch's two lines
  size_t longest = 0, start = 0;
  for (size_t end; (end = lines.find('\n', start)) != std::string::npos; start = end + 1) longest = std::max(longest, end - start);
  CHECK(longest <= 80);
  CHECK(every.find("epoch 1/1 batch 20/25 ") != std::string::npos);
}

TEST_CASE("progress: none prints nothing, bar redraws in place within the width") {
  CHECK(printed({ProgressStyle::none, 0}, 2, 25).empty());
  ScopedEnv columns("COLUMNS", "60");
  const std::string bar = printed({ProgressStyle::bar, 0}, 1, 25);
  CHECK(bar.rfind("\r\033[KEpoch 1/1  1/25", 0) == 0);
  size_t redraws = 0;
  for (size_t at = 0; (at = bar.find("\r\033[K", at)) != std::string::npos;) {
    at += 4;
    const std::string drawn = bar.substr(at, bar.find("\r\033[K", at) - at);
    if (drawn.back() == '\n') continue;  // the epoch's last line stays, so it may wrap
    ++redraws;
    CHECK(drawn.size() <= 59);  // a column short of the width: no wrap
  }
  CHECK(redraws >= 2);
}

}  // namespace distrain::test

namespace distrain::test {

TEST_CASE("progress: at 80 columns the bar shows (img/s give way first), train.steps bounds epochs and batches, and a "
          "stop ends the open bar's line") {
  ScopedEnv columns("COLUMNS", "80");
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  Progress progress(f, {ProgressStyle::bar, 0}, 10, 938, 1000);  // train.steps = 1000: 2 epochs, the second of 62
  const LossStats running{10.0, 3, 8};
  progress.begin_epoch(1);
  progress.update(31, running, 12345.0, 3.0);
  progress.interrupt();
  progress.interrupt();  // once only
  std::string text(static_cast<size_t>(std::ftell(f)), '\0');
  std::rewind(f);
  REQUIRE(std::fread(text.data(), 1, text.size(), f) == text.size());
  std::fclose(f);
  CHECK(text.rfind("\r\033[KEpoch 2/2  31/62 [", 0) == 0);  // a bar at 80 columns
  CHECK(text.find("img/s") == std::string::npos);
  CHECK(text.find("ETA 0:03 - loss: 1.2500 - accuracy: 0.3750\n") != std::string::npos);  // 31 more batches at 0.1 s
  CHECK(count(text, "\n") == 1);
}

}  // namespace distrain::test

namespace distrain::test {
namespace {

// What a SlowPhase of `body` printed.
template <typename Body>
std::string phase_printed(Body body) {
  std::FILE* f = std::tmpfile();
  REQUIRE(f);
  bool ended_bar = false;
  {
    SlowPhase phase(f, "saving ckpt-000006.h5", [&] { ended_bar = true; });
    body(phase);
  }
  std::string text(static_cast<size_t>(std::ftell(f)), '\0');
  std::rewind(f);
  REQUIRE(std::fread(text.data(), 1, text.size(), f) == text.size());
  std::fclose(f);
  CHECK(ended_bar == !text.empty());
  return text;
}

}  // namespace

// A phase over a second says what it is doing, then how long it took; a short one says nothing.
TEST_CASE("slow phases: a line after a second, then the time, and nothing for a short phase") {
  CHECK(phase_printed([](SlowPhase&) {}).empty());
  const std::string slow = phase_printed([](SlowPhase& p) {
    std::this_thread::sleep_for(SlowPhase::kQuiet + std::chrono::milliseconds(200));
    p.set_outcome("saved ckpt-000006.h5 (1.49 GB)");
  });
  CHECK(slow.rfind("saving ckpt-000006.h5...\nsaved ckpt-000006.h5 (1.49 GB) in 1.", 0) == 0);
  CHECK(slow.back() == '\n');
}

}  // namespace distrain::test
