// stop_signal.cpp — see stop_signal.hpp.
#include "util/stop_signal.hpp"

#include <csignal>

namespace cnnscale {
namespace {
volatile std::sig_atomic_t g_signal = 0;
extern "C" void on_stop_signal(int sig) { g_signal = sig; }
}  // namespace

void install_stop_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal_received() { return static_cast<int>(g_signal); }

const char* stop_signal_name(int sig) {
  return sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}

}  // namespace cnnscale
