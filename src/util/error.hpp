// error.hpp — how cnnscale reports failures.
//
// UserError: a mistake the user can fix (bad option, bad file, bad launch). The
// command-line front end prints it as one line "cnnscale: error: <what>" and exits
// with status 2 (or aborts the MPI job when other ranks may be waiting).
// fail(...) builds and throws one from streamable parts; fail_collective(rank, ...)
// marks it as found by every rank alike. Modules derive typed errors from it where a
// caller must tell kinds apart (e.g. CheckpointMismatch in train/checkpoint.hpp).
//
// InternalError: a broken invariant of cnnscale itself (a bug, not the user's doing).
// main() prints "cnnscale: internal error: <what>" with a request to report it and
// ends the job with status 3. internal_error(...) throws one. It is deliberately not
// a UserError, so code that handles user mistakes never swallows it.
#pragma once
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace cnnscale {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& what) : std::runtime_error(what) {}
};

// A mistake every rank detects identically (same options, same files): main() lets
// rank 0 print it once and every rank leaves through MPI_Finalize, no MPI_Abort.
class CollectiveError : public UserError {
 public:
  CollectiveError(const std::string& what, int rank) : UserError(what), rank_(rank) {}
  int rank() const { return rank_; }

 private:
  int rank_;
};

template <typename... Parts>
[[noreturn]] void fail_collective(int rank, const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw CollectiveError(os.str(), rank);
}

template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw UserError(os.str());
}

class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what) : std::logic_error(what) {}
};

template <typename... Parts>
[[noreturn]] void internal_error(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  throw InternalError(os.str());
}

// Prints "cnnscale: error: <message>" to stderr (one line, flushed).
void print_error(const std::string& message);

// Prints "cnnscale: internal error: <message> (... please report it ...)" to stderr (one line).
void print_internal_error(const std::string& message);

// Exit status used for user errors.
constexpr int kUserErrorStatus = 2;
// Exit status used for internal errors and failed library calls (abort_job).
constexpr int kInternalErrorStatus = 3;

// ---- failures no rank can recover from (a CUDA, cuDNN, cuBLAS or NCCL call failed) ----

// "<call> failed at <file>:<line> on rank <r>: <what>": the line a failed library call reports.
std::string failed_call_message(const char* call, const char* file, int line, const char* what);

// Prints "cnnscale: error: <message>" and ends the job with status. Here in util it ends
// this process; once launch has started MPI (bootstrap) it is launch's abort_job, which
// aborts every rank (launch/mpi_check.hpp), so no rank is left waiting.
[[noreturn]] void fatal_error(const std::string& message, int status = 3);

// What fatal_error hands over to, after the last words; nullptr: print and exit. It must
// not return: it ends the process (launch's abort_job) or throws (the single-process GPU
// test main, tests/common/gpu_test_guard.hpp, so that a failed CUDA/cuDNN/cuBLAS call
// fails one test case, not the test binary). fatal_error is [[noreturn]], which leaving
// by an exception satisfies; a handler that throws must not when called during unwinding.
using FatalErrorHandler = void (*)(const std::string& message, int status);
void set_fatal_error_handler(FatalErrorHandler handler);

// ---- last words: a record left before the process ends on a fatal error ----
// One callback (rank 0's run end record, train/run_end.hpp) that fatal_error, launch's
// abort_job and the --collective-timeout watchdog call with their message just before
// they end the process, so that a run directory says how its run ended. Called at most
// once per set_last_words; it must not throw. Empty: none.
using LastWords = std::function<void(const std::string& why)>;
void set_last_words(LastWords words);
void say_last_words(const std::string& why);

}  // namespace cnnscale
