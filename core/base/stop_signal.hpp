// A graceful stop on SIGTERM and SIGINT. Schedulers (Slurm, Kubernetes) send SIGTERM some
// seconds before they kill a preempted job; the trainer then ends its step, saves a
// checkpoint and returns, so a rerun resumes there instead of at the last periodic save.
// The handler only records the signal (async-signal-safe); the trainer polls it between
// steps. A second SIGTERM or SIGINT ends the process at once with the signal's default
// action, for a user who does not want to wait for the save.
#pragma once

namespace distrain {

// Installs the handlers for SIGTERM and SIGINT, except where the signal is ignored (the
// process's disposition: called by the CLI).
void install_stop_handlers();

// The first stop signal received (SIGTERM or SIGINT), 0 while none has come.
int stop_signal();

}  // namespace distrain
