// log.hpp — rank-aware progress output.
// log_info prints on rank 0 only (after set_log_rank), to stdout, line-buffered;
// log_warn prints "cnnscale: warning: ..." on rank 0 to stderr; log_all prints on
// every rank prefixed with "[rank N]".
//
// The status line (rank 0's live progress bar, `cnnscale train` on a terminal): drawn
// in place on stderr only where stderr is a terminal and TERM is not "dumb"; batch logs
// (stderr a file or pipe) never get it, so they keep plain lines. Every line printed
// through this file (and print_error) first erases it and then redraws it, so it
// stays below the log.
#pragma once
#include <string>

namespace cnnscale {

void set_log_rank(int rank);
int log_rank();
void log_info(const std::string& line);
void log_warn(const std::string& line);
void log_all(const std::string& line);

// Rank 0 and stderr a terminal (isatty, TERM not "dumb"): set_status_line draws.
// set_status_mode overrides the terminal test (`cnnscale train --progress bar|lines`):
// under mpirun a rank's stderr is a pipe even when mpirun's is a terminal.
enum class StatusMode { automatic, on, off };
void set_status_mode(StatusMode mode);
bool status_line_enabled();
// Replaces the status line ("" erases it), cut to the terminal's width. No-op where
// !status_line_enabled().
void set_status_line(const std::string& text);
// Erases the status line for a line about to be printed elsewhere (print_error);
// the next set_status_line draws it again.
void hide_status_line();
int terminal_columns();  // stderr's width, 80 when unknown

}  // namespace cnnscale
