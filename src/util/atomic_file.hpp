// atomic_file.hpp — write a whole file so that readers see either the old file or
// the complete new one: write to "<path>.tmp.<host>.<pid>", fsync, rename, fsync the
// folder. A writer killed mid-write (SIGKILL, node crash) leaves its temporary file;
// remove_stale_temporaries() clears those at the next start.
//
// Output files a user names (--json FILE, --timeline FILE, the files in report --output
// DIR, run.json and checkpoints in a run directory): every writer goes through
// write_file_atomic, which keeps one rule (docs/report.md "Output files"):
//  - a regular file, or none yet: replaced whole, as above;
//  - a symbolic link (a chain of them): written through — the file it finally names is
//    replaced whole (its temporary file beside that file), or created when missing; the
//    link itself stays;
//  - anything else — a directory, a device such as /dev/null, a FIFO, a socket, a loop of
//    links — is refused with a UserError that names the path and what it is.
// Why (issue 39): renaming over the path replaced a link, a FIFO or a device with a
// regular file and exited 0 (as root, `--json /dev/null` replaced /dev/null itself);
// writing into such a file instead would not be whole either.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace cnnscale {

// Throws UserError naming the path and the OS's reason on failure, and for a path that
// the rule above refuses.
void write_file_atomic(const std::string& path, const std::string& content);
void write_file_atomic(const std::string& path, const void* data, size_t size);

// The file write_file_atomic(path) replaces: path itself, or the final target of the
// symbolic link(s) at path (which may not exist yet). UserError "cannot write 'PATH': …"
// for a path the rule refuses.
std::string output_target(const std::string& path);

// Before the work whose result goes to `path` (a benchmark, a training), so that a bad
// path costs nothing: UserError naming `option` ("--json") and the path when the rule
// refuses it, or when the folder it would be created in does not exist or is not
// writable. Write errors (a full disk) can still happen at the end.
void check_output_file(const std::string& path, const std::string& option);

// Removes dir's "<name>.tmp.<host>.<pid>" files whose writer is gone: only files
// written on this host (a run directory on a shared file system may have live writers
// on other hosts) and only when no process <pid> exists here. Returns the names removed.
std::vector<std::string> remove_stale_temporaries(const std::string& dir);

// Appends `bytes` to the file open as fd, whole or not at all: a short or failed write is
// cut back off (shrinking needs no space), so the next append does not continue a torn
// record. Returns 0, or the errno of the failure (ENOSPC for a write of 0 bytes).
int append_whole(int fd, const std::string& bytes);

// fsyncs a directory (after a rename inside it); errors are ignored.
void fsync_directory(const std::string& dir);

}  // namespace cnnscale
