// log.cpp — see log.hpp.
#include "util/log.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cnnscale {
namespace {
int g_rank = 0;
std::string g_status;         // the status line's text ("" when none is shown)
bool g_status_shown = false;  // it is on the screen now
StatusMode g_status_mode = StatusMode::automatic;

void erase_status() {
  if (!g_status_shown) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  g_status_shown = false;
}

void draw_status() {
  if (g_status.empty() || !status_line_enabled()) return;
  std::fprintf(stderr, "\r\033[K%s", g_status.c_str());
  std::fflush(stderr);
  g_status_shown = true;
}
}  // namespace

void set_log_rank(int rank) { g_rank = rank; }
int log_rank() { return g_rank; }

void set_status_mode(StatusMode mode) { g_status_mode = mode; }

bool status_line_enabled() {
  if (g_rank != 0 || g_status_mode == StatusMode::off) return false;
  if (g_status_mode == StatusMode::on) return true;
  static const bool tty = [] {
    const char* term = std::getenv("TERM");
    return isatty(STDERR_FILENO) == 1 && !(term && std::strcmp(term, "dumb") == 0);
  }();
  return tty && g_rank == 0;
}

int terminal_columns() {
  winsize ws{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

void set_status_line(const std::string& text) {
  if (!status_line_enabled()) return;
  const size_t width = static_cast<size_t>(terminal_columns() > 1 ? terminal_columns() - 1 : 1);
  g_status = text.size() > width ? text.substr(0, width) : text;
  erase_status();
  draw_status();
}

void hide_status_line() { erase_status(); }

void log_info(const std::string& line) {
  if (g_rank != 0) return;
  erase_status();
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
  draw_status();
}

void log_warn(const std::string& line) {
  if (g_rank != 0) return;
  erase_status();
  std::fprintf(stderr, "cnnscale: warning: %s\n", line.c_str());
  std::fflush(stderr);
  draw_status();
}

void log_all(const std::string& line) {
  erase_status();
  std::fprintf(stderr, "[rank %d] %s\n", g_rank, line.c_str());
  std::fflush(stderr);
  draw_status();
}

}  // namespace cnnscale
