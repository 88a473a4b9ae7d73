// RunLock: one trainer per run folder. Two trainers writing one folder would race on its
// checkpoint names, and one's --fresh would delete the other's checkpoints. The lock is
// flock(2) on <run_dir>/.lock, which holds the owner's PID as text for the error message;
// the kernel releases it when the process ends however it ends, so a crash leaves no
// stale lock (the file itself stays, harmlessly, and is reused).
#pragma once
#include <string>

namespace distrain {

class RunLock {
 public:
  // Takes the lock, creating the folder if needed; throws UserError naming the folder and
  // the holder's PID when another process holds it.
  explicit RunLock(const std::string& run_dir);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace distrain
