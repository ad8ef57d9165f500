// atomic_file.hpp — write a whole file so that readers see either the old file or
// the complete new one: write to "<path>.tmp.<host>.<pid>", fsync, rename, fsync the
// folder. A writer killed mid-write (SIGKILL, node crash) leaves its temporary file;
// remove_stale_temporaries() clears those at the next start.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace cnnscale {

// Throws UserError naming the path and the OS's reason on failure.
void write_file_atomic(const std::string& path, const std::string& content);
void write_file_atomic(const std::string& path, const void* data, size_t size);

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
