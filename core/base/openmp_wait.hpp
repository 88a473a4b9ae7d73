// How long an idle OpenMP worker spins before it sleeps. libgomp (the runtime of oneDNN and
// of distrain's own kernels) spins 300,000 times by default, milliseconds: on a quiet
// machine that saves a wake-up between parallel regions; beside another job it takes the
// cores from the threads that compute. distrain's default is kOpenMpSpinCount (chosen by
// measurement, docs/BENCHMARKS.md "Quiet and busy") unless the user set OMP_WAIT_POLICY or
// GOMP_SPINCOUNT. libgomp reads them once, as it loads, before main: so the process
// executes itself again with GOMP_SPINCOUNT set, once, before anything else has started.
#pragma once

namespace distrain {

inline constexpr const char* kOpenMpSpinCount = "3000";

// Call first in main. Returns when the user chose a policy or the wait is already set (the
// second execution); on a failed re-execution with libgomp's default, saying so on stderr.
void set_openmp_wait(char** argv);

// The waiting in force, for `distrain info` and notices: "GOMP_SPINCOUNT=3000 (distrain's
// default)", "OMP_WAIT_POLICY=passive (set by the user)", ...
const char* openmp_wait_description();

}  // namespace distrain
