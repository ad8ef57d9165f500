// stop_signal.hpp — SIGUSR1/SIGTERM (Slurm's --signal=USR1@T before the time limit,
// scancel, preemption) set a flag; the training loop reads it at each step boundary,
// all ranks agree through one small allreduce, checkpoint, and exit with
// kExitCheckpointedOnSignal so that a requeued job resumes with --resume auto. Waits
// before training (the rendezvous store: launch/rendezvous_store.cpp) read it too and
// end with a message (in util: every module may look).
#pragma once

namespace cnnscale {

constexpr int kExitCheckpointedOnSignal = 75;  // EX_TEMPFAIL: stopped cleanly, resume later

void install_stop_signal_handlers();
// The signal number received (0 if none).
int stop_signal_received();
// "SIGTERM", "SIGUSR1", or "signal N".
const char* stop_signal_name(int sig);

}  // namespace cnnscale
