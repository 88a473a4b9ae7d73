#include "core/base/stop_signal.hpp"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <thread>

namespace distrain {

namespace {

std::atomic<bool> graceful{false};
std::atomic<int> caught{0};
sigset_t watched;  // written once by start_signal_watcher, before the watcher starts

bool ignored_at_start(int sig) {
  struct sigaction current {};
  sigaction(sig, nullptr, &current);
  return current.sa_handler == SIG_IGN;
}

// The default action (termination by the signal) from the watcher: unblocked in this thread
// and raised here, the signal ends the whole process with status 128 + sig.
[[noreturn]] void terminate_by(int sig) {
  std::signal(sig, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  std::raise(sig);
  _exit(128 + sig);  // not reached: the default action of SIGTERM and SIGINT terminates
}

void watch() {
  for (;;) {
    int sig = 0;
    if (sigwait(&watched, &sig) != 0) continue;
    int none = 0;
    if (graceful.load() && caught.compare_exchange_strong(none, sig)) continue;
    terminate_by(sig);
  }
}

}  // namespace

void start_signal_watcher() {
  sigemptyset(&watched);
  for (int sig : {SIGTERM, SIGINT})
    if (!ignored_at_start(sig)) sigaddset(&watched, sig);
  pthread_sigmask(SIG_BLOCK, &watched, nullptr);
  std::thread watcher(watch);
  pthread_setname_np(watcher.native_handle(), "dt-signals");  // found by name in tests and debuggers
  watcher.detach();
}

void enable_graceful_stop() { graceful.store(true); }

int stop_signal() { return caught.load(); }

StopSignalsUnblocked::StopSignalsUnblocked() {
  unblocked_ = pthread_sigmask(SIG_UNBLOCK, &watched, nullptr) == 0;
}

StopSignalsUnblocked::~StopSignalsUnblocked() {
  if (unblocked_) pthread_sigmask(SIG_BLOCK, &watched, nullptr);
}

}  // namespace distrain
