// A graceful stop on SIGTERM and SIGINT. Schedulers (Slurm, Kubernetes) send SIGTERM some
// seconds before they kill a preempted job; the trainer then ends its step, saves a
// checkpoint and returns, so a rerun resumes there instead of at the last periodic save.
//
// No thread that computes ever runs a signal handler: main blocks both signals before it
// starts any thread (OpenMP's, oneDNN's, MPI's inherit the mask), and one dedicated thread
// takes them with sigwait. A handler interrupting threaded oneDNN kernels corrupted the heap
// ("free(): invalid pointer" in dnnl_sgemm) in some signalled runs; with nothing interrupted
// there is nothing to corrupt. The trainer polls the recorded signal between steps.
//
// Until training enables the graceful stop, and for a second signal after it, the watcher
// ends the process with the signal's default action (exit status 128 + signal), as if no
// handler were installed: `distrain eval` or a recipe check stops at once.
#pragma once

namespace distrain {

// Blocks SIGTERM and SIGINT in the calling thread (and so in every thread it starts later)
// and starts the thread that takes them. Call first thing in main, before any other thread
// exists. A signal ignored when the process starts stays ignored: a shell starts background
// jobs with SIGINT ignored, so that Ctrl-C reaches only the foreground one.
void start_signal_watcher();

// From now on the first stop signal is only recorded (stop_signal()); a second one ends the
// process at once.
void enable_graceful_stop();

// The first stop signal received after enable_graceful_stop() (SIGTERM or SIGINT), 0 while
// none has come.
int stop_signal();

// While alive, the calling thread does not block the stop signals, so that a child process it
// starts (popen: a fork of this thread, whose mask survives exec) can be stopped normally.
class StopSignalsUnblocked {
 public:
  StopSignalsUnblocked();
  ~StopSignalsUnblocked();
  StopSignalsUnblocked(const StopSignalsUnblocked&) = delete;
  StopSignalsUnblocked& operator=(const StopSignalsUnblocked&) = delete;

 private:
  bool unblocked_ = false;
};

}  // namespace distrain
