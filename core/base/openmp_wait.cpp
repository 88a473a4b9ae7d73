#include "core/base/openmp_wait.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace distrain {

namespace {

// Set by distrain for its own second execution, so that the user's choice and distrain's
// default can be told apart afterwards.
constexpr const char* kMarker = "DISTRAIN_OPENMP_WAIT";

}  // namespace

void set_openmp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  ::setenv("GOMP_SPINCOUNT", kOpenMpSpinCount, 1);
  ::setenv(kMarker, "default", 1);
  ::execv("/proc/self/exe", argv);
  const int error = errno;  // no /proc, say: go on with libgomp's default, which is still correct
  ::unsetenv("GOMP_SPINCOUNT");
  ::unsetenv(kMarker);
  std::fprintf(stderr, "distrain: warning: could not restart with GOMP_SPINCOUNT=%s (%s); idle OpenMP threads spin "
               "libgomp's default time, slower beside other jobs\n", kOpenMpSpinCount, std::strerror(error));
}

const char* openmp_wait_description() {
  static const std::string text = [] {
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    const char* spin = std::getenv("GOMP_SPINCOUNT");
    const bool ours = std::getenv(kMarker) != nullptr;
    std::string t;
    if (policy) t += std::string("OMP_WAIT_POLICY=") + policy;
    if (spin) t += std::string(t.empty() ? "" : ", ") + "GOMP_SPINCOUNT=" + spin;
    if (t.empty()) return std::string("libgomp's default (300,000 spins)");
    return t + (ours ? " (distrain's default)" : " (set by the user)");
  }();
  return text.c_str();
}

}  // namespace distrain
