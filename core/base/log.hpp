// Rank-aware logging: only the leader (rank 0; the first worker under a parameter server)
// prints info. Errors carry the rank (cli/main.cpp prints them).
#pragma once
#include <fmt/format.h>

#include <cstdio>
#include <string>

namespace distrain::log {

// Under a launcher (mpirun, srun): this process's rank, which messages then carry.
void set_rank(int rank);
int rank();
// "[rank N] " once set_rank was called, else "": a one-process run has no ranks to tell apart.
std::string prefix();
void set_leader(bool leader);
bool leader();
// Where info goes: stdout, unless a command prints JSON there (then stderr, which keeps
// `--json` output one parseable document).
void set_info_stream(std::FILE* stream);
std::FILE* info_stream();

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (!leader()) return;
  std::FILE* out = info_stream();
  fmt::print(out, "{}\n", fmt::format(f, std::forward<Args>(args)...));
  std::fflush(out);
}

// Something the user should know that is not an error, from any rank, on stderr.
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  fmt::print(stderr, "{}warning: {}\n", prefix(), fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace distrain::log
