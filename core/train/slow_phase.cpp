#include "core/train/slow_phase.hpp"

#include <fmt/format.h>

#include <exception>

namespace distrain {

SlowPhase::SlowPhase(std::FILE* out, std::string what, std::function<void()> before_line)
    : out_(out), what_(std::move(what)), before_line_(std::move(before_line)), start_(std::chrono::steady_clock::now()) {
  if (out_) watcher_ = std::thread([this] { watch(); });
}

void SlowPhase::watch() {
  std::unique_lock lock(mutex_);
  if (ended_.wait_for(lock, kQuiet, [this] { return done_; })) return;
  try {  // a full disk must not end the process from this thread
    if (before_line_) before_line_();
    fmt::print(out_, "{}...\n", what_);
    std::fflush(out_);
  } catch (const std::exception&) {
  }
  announced_ = true;
}

void SlowPhase::set_outcome(std::string outcome) {
  std::lock_guard lock(mutex_);
  outcome_ = std::move(outcome);
}

SlowPhase::~SlowPhase() {
  if (!watcher_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  ended_.notify_one();
  watcher_.join();
  // A phase that failed says nothing more: its error follows.
  if (!announced_ || std::uncaught_exceptions() > exceptions_) return;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  try {
    fmt::print(out_, "{} in {:.1f} s\n", outcome_.empty() ? what_ + ": done" : outcome_, seconds);
    std::fflush(out_);
  } catch (const std::exception&) {
  }
}

}  // namespace distrain
