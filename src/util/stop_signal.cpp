// stop_signal.cpp — see stop_signal.hpp.
#include "util/stop_signal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <ctime>
#include <initializer_list>

namespace cnnscale {
namespace {
volatile std::sig_atomic_t g_signal = 0;
int g_pipe[2] = {-1, -1};
// StopSignals::prep: a later stop signal ends the process (stop_signal.hpp).
volatile std::sig_atomic_t g_escalate = 0;
timespec g_first{};  // when the first stop signal arrived (CLOCK_MONOTONIC)
constexpr long kSecondSignalNs = 1'000'000'000;
extern "C" void on_stop_signal(int sig) {
  const int saved = errno;  // errno is the interrupted code's
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);  // async-signal-safe, as are sigaction, raise and write
  if (g_signal == 0) {
    g_first = now;
  } else if (g_escalate && (now.tv_sec - g_first.tv_sec) * 1'000'000'000L + (now.tv_nsec - g_first.tv_nsec) >=
                               kSecondSignalNs) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, nullptr);
    raise(sig);  // delivered when this handler returns (sig is blocked while it runs)
    errno = saved;
    return;
  }
  if (g_signal == 0 || !g_escalate) g_signal = sig;  // the trainer: the latest; prep: the first (its message)
  if (g_pipe[1] >= 0) {
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_pipe[1], &byte, 1);  // non-blocking: a full pipe is fine
  }
  errno = saved;
}
}  // namespace

void install_stop_signal_handlers(StopSignals which) {
  if (g_pipe[0] < 0 && ::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_pipe[0] = g_pipe[1] = -1;
  const bool prep = which == StopSignals::prep;
  struct sigaction old {};
  const bool interrupt = prep && sigaction(SIGINT, nullptr, &old) == 0 && old.sa_handler != SIG_IGN;
  const bool hangup = prep && sigaction(SIGHUP, nullptr, &old) == 0 && old.sa_handler != SIG_IGN;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (prep)  // one stop signal handled at a time (the first's time is written once)
    for (const int sig : {SIGUSR1, SIGTERM, SIGINT, SIGHUP}) sigaddset(&sa.sa_mask, sig);
  g_escalate = prep ? 1 : 0;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (interrupt) sigaction(SIGINT, &sa, nullptr);
  if (hangup) sigaction(SIGHUP, &sa, nullptr);
}

int stop_signal_received() { return static_cast<int>(g_signal); }

int stop_signal_fd() { return g_pipe[0]; }

const char* stop_signal_name(int sig) {
  return sig == SIGTERM ? "SIGTERM"
         : sig == SIGUSR1 ? "SIGUSR1"
         : sig == SIGINT  ? "SIGINT"
         : sig == SIGHUP  ? "SIGHUP"
                          : "a signal";
}

}  // namespace cnnscale
