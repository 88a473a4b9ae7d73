// A part of a run that may take a while with nothing else to show (reading the data,
// building the model, initialising or loading weights, validating, saving a checkpoint):
// once it has run a second, a line says what it is doing; at its end, a line says how long
// it took. Phases under a second print nothing.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace distrain {

class SlowPhase {
 public:
  // out == nullptr: prints nothing (ranks other than the one that reports). before_line
  // runs before the first line (a progress bar ends its open line).
  SlowPhase(std::FILE* out, std::string what, std::function<void()> before_line = {});
  ~SlowPhase();
  SlowPhase(const SlowPhase&) = delete;
  SlowPhase& operator=(const SlowPhase&) = delete;
  // What the closing line says instead of "<what>: done" ("saved ckpt-000006.h5, 1.49 GB").
  void set_outcome(std::string outcome);

  static constexpr std::chrono::milliseconds kQuiet{1000};

 private:
  void watch();
  std::FILE* out_;
  std::string what_, outcome_;
  std::function<void()> before_line_;
  std::chrono::steady_clock::time_point start_;
  int exceptions_ = std::uncaught_exceptions();  // those under way when the phase began
  std::mutex mutex_;
  std::condition_variable ended_;
  bool done_ = false, announced_ = false;
  std::thread watcher_;
};

}  // namespace distrain
