#include "cli/bench_load.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/base/error.hpp"
#include "core/base/stop_signal.hpp"

namespace distrain::cli {

std::string self_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  DT_CHECK(n > 0, "cannot find this executable's path");
  return std::string(buf, static_cast<size_t>(n));
}

BenchLoad::BenchLoad(int processes, std::vector<std::string> args) : processes_(processes), args_(std::move(args)) {}

void BenchLoad::start(double settle_s) {
  const std::string exe = self_path();
  std::vector<char*> argv{const_cast<char*>(exe.c_str())};
  for (std::string& a : args_) argv.push_back(a.data());
  argv.push_back(nullptr);
  const StopSignalsUnblocked for_the_children;  // a load process stops as any distrain does
  for (int i = 0; i < processes_; ++i) {
    const pid_t pid = ::fork();
    DT_CHECK(pid >= 0, "bench --busy: cannot start a load process");
    if (pid == 0) {  // only async-signal-safe calls until exec
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives bench, however bench ends
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    running_.push_back(pid);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(settle_s));
  for (const pid_t pid : running_)
    DT_USER_CHECK(::waitpid(pid, nullptr, WNOHANG) == 0, "bench --busy: a load process ({} {}) ended at once",
                  exe, args_.empty() ? "" : args_.front());
}

void BenchLoad::stop() {
  for (const pid_t pid : running_) ::kill(pid, SIGKILL);
  for (const pid_t pid : running_) ::waitpid(pid, nullptr, 0);
  running_.clear();
}

}  // namespace distrain::cli
