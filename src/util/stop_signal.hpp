// stop_signal.hpp — SIGUSR1/SIGTERM (Slurm's --signal=USR1@T before the time limit,
// scancel, preemption) set a flag; the training loop reads it at each step boundary,
// all ranks agree through one small allreduce, checkpoint, and exit with
// kExitCheckpointedOnSignal so that a requeued job resumes with --resume auto. Waits
// before training (the rendezvous store: launch/rendezvous_store.cpp) read it too and
// end with a message (in util: every module may look).
//
// stop_signal_fd(): a descriptor that becomes readable when a stop signal arrives and
// stays so (the handler writes one byte to a pipe; nobody reads it), for threads that
// must act at once while the training thread is stuck in a wait: rank 0's end record
// (train/run_end.hpp) and the watchdog (comm/watchdog.hpp). Why: a launcher that ends a
// job after a rank died (mpiexec: SIGTERM to the others 1 s after the death, SIGKILL
// 1 s later, measured with Open MPI 4.1) leaves no step boundary to write a record at.
#pragma once

namespace cnnscale {

constexpr int kExitCheckpointedOnSignal = 75;  // EX_TEMPFAIL: stopped cleanly, resume later

// Which signals stop, and how many times.
enum class StopSignals {
  // SIGUSR1 and SIGTERM set the flag, each time: the trainer stops at its next step
  // boundary, whatever else arrives before it (a launcher's SIGKILL ends it sooner).
  train,
  // SIGINT (Ctrl-C) and SIGHUP (a closed terminal or ssh session; issue 48) too, each
  // unless it is ignored (a shell's background job, nohup): `cnnscale prep`
  // cleans its partial output up on any of them at its next block of samples, which can
  // be far off (a long decode; a stdout nobody reads). A stop signal arriving 1 s or more
  // after the first ends the process at once, the default way, leaving what a SIGKILL
  // leaves (a user's second Ctrl-C). One within that second is the same stop delivered
  // twice and changes nothing: GNU timeout signals its child and then its own process
  // group, mpirun forwards a SIGTERM after the terminal's SIGINT (once, resetting the
  // handlers at the first signal let such a pair kill prep without its clean-up).
  prep,
};
void install_stop_signal_handlers(StopSignals which = StopSignals::train);
// The signal number received (0 if none).
int stop_signal_received();
// "SIGTERM", "SIGUSR1", "SIGINT", "SIGHUP", or "a signal".
const char* stop_signal_name(int sig);
// Readable (poll POLLIN) once a stop signal arrived; -1 before install_stop_signal_handlers().
int stop_signal_fd();

}  // namespace cnnscale
