// Rank-aware logging: only the leader (rank 0; the first worker under a parameter server)
// prints info. Errors carry the rank (cli/main.cpp prints them).
#pragma once
#include <fmt/format.h>

#include <cstdio>

namespace distrain::log {

void set_rank(int rank);
int rank();
void set_leader(bool leader);
bool leader();

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (!leader()) return;
  fmt::print(stdout, "{}\n", fmt::format(f, std::forward<Args>(args)...));
  std::fflush(stdout);
}

// Something the user should know that is not an error, from any rank, on stderr.
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  fmt::print(stderr, "[rank {}] warning: {}\n", rank(), fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace distrain::log
