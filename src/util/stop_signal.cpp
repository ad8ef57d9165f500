// stop_signal.cpp — see stop_signal.hpp.
#include "util/stop_signal.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <initializer_list>

namespace cnnscale {
namespace {
volatile std::sig_atomic_t g_signal = 0;
int g_pipe[2] = {-1, -1};
// StopSignals::prep: the signals whose handler the first one resets (set before any is installed).
int g_reset[3] = {0, 0, 0};
int g_resets = 0;
extern "C" void on_stop_signal(int sig) {
  g_signal = sig;
  struct sigaction dfl {};  // sigaction() is async-signal-safe
  dfl.sa_handler = SIG_DFL;
  for (int i = 0; i < g_resets; ++i) sigaction(g_reset[i], &dfl, nullptr);
  if (g_pipe[1] >= 0) {
    const int saved = errno;  // write() is async-signal-safe; errno is the interrupted code's
    const char byte = 1;
    [[maybe_unused]] const ssize_t n = ::write(g_pipe[1], &byte, 1);  // non-blocking: a full pipe is fine
    errno = saved;
  }
}
}  // namespace

void install_stop_signal_handlers(StopSignals which) {
  if (g_pipe[0] < 0 && ::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_pipe[0] = g_pipe[1] = -1;
  const bool prep = which == StopSignals::prep;
  struct sigaction old {};
  const bool interrupt = prep && sigaction(SIGINT, nullptr, &old) == 0 && old.sa_handler != SIG_IGN;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  g_resets = 0;
  if (prep) {  // a second signal during the handler waits for its reset, then ends the process
    for (const int sig : {SIGUSR1, SIGTERM, SIGINT}) {
      if (sig == SIGINT && !interrupt) continue;
      sigaddset(&sa.sa_mask, sig);
      g_reset[g_resets++] = sig;
    }
  }
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  if (interrupt) sigaction(SIGINT, &sa, nullptr);
}

int stop_signal_received() { return static_cast<int>(g_signal); }

int stop_signal_fd() { return g_pipe[0]; }

const char* stop_signal_name(int sig) {
  return sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : sig == SIGINT ? "SIGINT" : "a signal";
}

}  // namespace cnnscale
