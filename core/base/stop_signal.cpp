#include "core/base/stop_signal.hpp"

#include <atomic>
#include <csignal>

namespace distrain {

namespace {

// Written by the handler on whichever thread the signal lands, read by the training
// thread: a lock-free atomic is both async-signal-safe and free of data races.
std::atomic<int> caught{0};
static_assert(std::atomic<int>::is_always_lock_free);

void on_stop_signal(int sig) {
  int none = 0;
  if (caught.compare_exchange_strong(none, sig)) return;
  // The second one: the default action (termination) now, as if no handler were installed.
  // The signal is blocked while its handler runs, so it is delivered as the handler returns.
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// A signal ignored when we start stays ignored: a shell starts background jobs with
// SIGINT ignored, so that Ctrl-C reaches only the foreground one.
void handle_unless_ignored(int sig) {
  struct sigaction action {}, previous {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // reads and writes in flight go on instead of failing with EINTR
  sigaction(sig, &action, &previous);
  if (previous.sa_handler == SIG_IGN) sigaction(sig, &previous, nullptr);
}

}  // namespace

void install_stop_handlers() {
  handle_unless_ignored(SIGTERM);
  handle_unless_ignored(SIGINT);
}

int stop_signal() { return caught.load(); }

}  // namespace distrain
