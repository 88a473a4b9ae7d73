#include "core/train/run_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/base/error.hpp"

namespace distrain {

namespace fs = std::filesystem;

namespace {

// The holder's PID as it wrote it; empty in the instant between its flock and its write.
std::string holder_pid(const fs::path& file) {
  std::string pid;
  std::ifstream(file) >> pid;
  return pid.empty() ? "unknown" : pid;
}

}  // namespace

RunLock::RunLock(const std::string& run_dir) {
  fs::create_directories(run_dir);
  const fs::path file = fs::path(run_dir) / ".lock";
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  DT_USER_CHECK(fd_ >= 0, "{}: cannot open ({}); is the run folder writable?", file.string(), std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    DT_USER_CHECK(err != EWOULDBLOCK, "{}: another distrain train (PID {}) is using this run folder; wait for it to end or "
                  "choose another --run-dir", run_dir, holder_pid(file));
    throw UserError(fmt::format("{}: cannot lock ({})", file.string(), std::strerror(err)));
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int err = errno;
    ::close(fd_);
    throw UserError(fmt::format("{}: cannot write ({}); is the disk full?", file.string(), std::strerror(err)));
  }
}

RunLock::~RunLock() { ::close(fd_); }  // releases the flock

}  // namespace distrain
