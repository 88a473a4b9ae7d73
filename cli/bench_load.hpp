// Other jobs on this machine's cores, for `bench --busy N`: N processes of this executable,
// each running `bench` of the same recipe without end, started and stopped between the
// measured rounds. They are what shares a desktop or a CI runner with a training run: ML jobs
// whose threads compute in parallel regions and wait between them, as distrain's do.
#pragma once
#include <string>
#include <sys/types.h>
#include <vector>

namespace distrain::cli {

class BenchLoad {
 public:
  // `args`: distrain's arguments for each process ("bench", the recipe, its --set flags).
  BenchLoad(int processes, std::vector<std::string> args);
  ~BenchLoad() { stop(); }
  BenchLoad(const BenchLoad&) = delete;
  BenchLoad& operator=(const BenchLoad&) = delete;

  // Starts the processes and gives them `settle_s` to build their models and start stepping.
  void start(double settle_s = 1.5);
  void stop();

 private:
  int processes_;
  std::vector<std::string> args_;
  std::vector<pid_t> running_;
};

// This executable's path (/proc/self/exe).
std::string self_path();

}  // namespace distrain::cli
