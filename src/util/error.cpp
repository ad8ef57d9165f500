// error.cpp — the single place that formats "cnnscale: error:" and "cnnscale: internal error:" lines.
#include "util/error.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "util/log.hpp"

namespace cnnscale {

void print_error(const std::string& message) {
  hide_status_line();
  std::fprintf(stderr, "cnnscale: error: %s\n", message.c_str());
  std::fflush(stderr);
}

void print_internal_error(const std::string& message) {
  hide_status_line();
  std::fprintf(stderr,
               "cnnscale: internal error: %s (a bug in cnnscale, not a mistake in the input: please report it "
               "with the command line and this message)\n",
               message.c_str());
  std::fflush(stderr);
}

namespace {
std::atomic<FatalErrorHandler> g_fatal_handler{nullptr};
std::mutex g_words_mutex;
LastWords g_words;
}  // namespace

// Not a fixed buffer: a cuDNN call's text alone can pass 512 characters, and the H100
// run of 2026-11-27 lost the library's own error string to the cut ("CUDNN_STATUS_E").
std::string failed_call_message(const char* call, const char* file, int line, const char* what) {
  return std::string(call) + " failed at " + file + ":" + std::to_string(line) + " on rank " +
         std::to_string(log_rank()) + ": " + (what ? what : "(no description)");
}

void set_fatal_error_handler(FatalErrorHandler handler) { g_fatal_handler.store(handler); }

void set_last_words(LastWords words) {
  std::lock_guard<std::mutex> lock(g_words_mutex);
  g_words = std::move(words);
}

void say_last_words(const std::string& why) {
  LastWords words;
  {
    std::lock_guard<std::mutex> lock(g_words_mutex);
    words = std::move(g_words);
    g_words = nullptr;
  }
  if (words) words(why);
}

void fatal_error(const std::string& message, int status) {
  say_last_words(message);
  if (FatalErrorHandler h = g_fatal_handler.load()) h(message, status);
  print_error(message);
  std::exit(status);
}

}  // namespace cnnscale
