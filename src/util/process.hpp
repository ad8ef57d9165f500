// process.hpp — this host's name, whether a process a file names (by host and pid, as
// run.lock and the temporary files of atomic_file.hpp record their writers) still
// exists, and whether a lock on a file is held by the process its file records.
//
// Why: `cnnscale watch` waited forever on a killed run whose run.lock another process
// held (issue 39): the lock alone cannot tell the run from that process; the recorded
// holder's pid can, on the host that recorded it. A training in another pid namespace on
// this host (`unshare --pid`, a container sharing the host's name: Docker --network host,
// Kubernetes hostNetwork) records the pid it has there, which is not its pid here: the
// lock holder's NSpid line (/proc/PID/status, every pid it has from this namespace down)
// ties the two (issue 39 review: such a live run was called killed).
#pragma once
#include <string>
#include <vector>

namespace cnnscale {

// gethostname(); "" when it fails.
std::string this_host();

// True only when `host` is this host and no process `pid` exists here (kill(pid, 0)
// fails with ESRCH). False when it may exist, when pid is not positive, and when it ran
// on another host (which cannot be asked from here). A process of another pid namespace
// on this host (a container sharing its host name) is not seen: its pid reads as gone
// (lock_taken_by_other tells such a process from a stranger).
bool process_gone(const std::string& host, long pid);

// The pids that /proc/locks names as holding a lock (flock or POSIX, not the waiters) on
// the file at `path` (matched by device and inode), as this process's /proc sees them:
// 0 for a holder it cannot see (of another pid namespace, or whose pid is freed). [] when
// none is named and on systems without /proc/locks. For an flock the kernel names the
// process that took it; a child that inherited it is not named.
std::vector<long> lock_holder_pids(const std::string& path);

// The pids process `pid` has in each pid namespace from this /proc's down to its own (the
// NSpid line of /proc/PID/status: "NSpid: 11695 603" for a process that is 603 inside
// an `unshare --pid`). [] when it cannot be read (gone, hidepid, a kernel before 4.1).
std::vector<long> namespace_pids(long pid);

// The process's command name (/proc/PID/comm), "" when unknown.
std::string process_name(long pid);

// "pid 5150 (flock)"; "pid 5150" when its name cannot be read.
std::string describe_process(long pid);

// Whether the lock on `path` is held by another process than the one its file records as
// holder (`host`, and `pid` as that process saw itself): then the holders, as
// describe_process joined by ", ". "" whenever the recorded holder may hold it: it runs
// here or ran on another host (process_gone is false); /proc/locks names no holder, or one
// this process cannot see (pid 0) or whose /proc entry is there but cannot be read; or one
// of a holder's pids (namespace_pids) is `pid` — a training in a pid namespace of its own.
// A visible holder none of whose pids is the recorded one is another process, and so is a
// holder that is gone (no /proc entry): a child that inherited its descriptor holds it.
std::string lock_taken_by_other(const std::string& path, const std::string& host, long pid);

}  // namespace cnnscale
