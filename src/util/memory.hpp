// memory.hpp — how much memory this process can still get, and allocation failures as
// "out of memory while <what>: <size> asked …; <hint>" user errors.
//
// Large allocations (benchmark buffers, model parameters, checkpoint images, label
// arrays) are checked with check_memory() before any work, against the tightest real
// limit: `ulimit -v` (RLIMIT_AS, minus the address space already mapped), the cgroup's
// memory.max (Slurm's --mem, containers), and the node's MemAvailable + SwapFree. The
// message names that limit. An allocation that fails anyway (another process took the
// memory meanwhile) goes through allocating(), which turns std::bad_alloc into the
// same kind of message; main() catches any other std::bad_alloc.
#pragma once
#include <cstdint>
#include <new>
#include <string>

#include "util/error.hpp"

namespace cnnscale {

struct MemoryLimit {
  uint64_t bytes = UINT64_MAX;  // what this process can still allocate (UINT64_MAX: no known limit)
  std::string source;           // e.g. "ulimit -v 4.00 GiB, 312 MiB of it in use"
};
MemoryLimit memory_limit();

std::string format_bytes(uint64_t bytes);  // "40.0 GiB", "312 MiB", "12 B"

// "out of memory while <what>: <size> asked, at most <limit> available (<source>); <hint>"
// (bytes 0: the size is not known).
std::string out_of_memory_message(const std::string& what, uint64_t bytes, const std::string& hint);

// Throws UserError with out_of_memory_message when `bytes` exceed memory_limit().
void check_memory(const std::string& what, uint64_t bytes, const std::string& hint);

template <typename F>
decltype(auto) allocating(const std::string& what, uint64_t bytes, const std::string& hint, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    throw UserError(out_of_memory_message(what, bytes, hint));
  }
}

}  // namespace cnnscale
