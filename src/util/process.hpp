// process.hpp — this host's name, whether a process a file names (by host and pid, as
// run.lock and the temporary files of atomic_file.hpp record their writers) still
// exists, and which processes hold a lock on a file (/proc/locks).
//
// Why: `cnnscale watch` waited forever on a killed run whose run.lock another process
// held (issue 39): the lock alone cannot tell the run from that process; the recorded
// holder's pid can, on the host that recorded it.
#pragma once
#include <string>
#include <vector>

namespace cnnscale {

// gethostname(); "" when it fails.
std::string this_host();

// True only when `host` is this host and no process `pid` exists here (kill(pid, 0)
// fails with ESRCH). False when it may exist, when pid is not positive, and when it ran
// on another host (which cannot be asked from here). A process of another pid namespace
// on this host (a container sharing its host name) is not seen: its pid reads as gone.
bool process_gone(const std::string& host, long pid);

// The pids that /proc/locks names as holding a lock (flock or POSIX, not the waiters) on
// the file at `path` (matched by device and inode). [] when none is named, on systems
// without /proc/locks, and for holders of another pid namespace (named there as 0 or
// not at all). For an flock the kernel names the process that took it; a child that
// inherited it is not named.
std::vector<long> lock_holder_pids(const std::string& path);

// The process's command name (/proc/PID/comm), "" when unknown.
std::string process_name(long pid);

}  // namespace cnnscale
