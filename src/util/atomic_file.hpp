// atomic_file.hpp — write a whole file so that readers see either the old file or
// the complete new one: write to a temporary file beside it, fsync, rename, fsync the
// folder. A writer killed mid-write (SIGKILL, node crash) leaves its temporary file;
// remove_stale_temporaries() clears those at the next start.
//
// Temporary files (issue 48): "<file>.tmp.<host>.<pid>.<random>", <random> 12 letters
// and digits from getrandom(2) (the first a letter), created with O_CREAT | O_EXCL |
// O_NOFOLLOW (a new name on EEXIST), so nothing another user planted at a name it could
// predict (a link, a file) is ever opened, truncated or renamed into place. Host and pid
// stay in the name for remove_stale_temporaries.
//
// Modes: a file replaced keeps its permission bits (rwx for user, group and others; a
// 0600 file stays 0600 — it is never widened); a new file gets 0666 & ~umask.
//
// Output files a user names (--json FILE, --timeline FILE, the files in report --output
// DIR, run.json and checkpoints in a run directory): every writer goes through
// write_file_atomic, which keeps one rule (docs/report.md "Output files"):
//  - a regular file, or none yet: replaced whole, as above;
//  - a symbolic link (a chain of them, or links among the folders on the way): written
//    through — the file it finally names is replaced whole (its temporary file beside
//    that file), or created when missing; the link itself stays;
//  - but a link that the kernel's fs.protected_symlinks rule would not follow is
//    refused, whether or not that sysctl is on: a link in a folder that anyone may write
//    and that has the sticky bit (/tmp), owned by neither the caller (its effective uid)
//    nor the folder's owner. Every link met is checked — each one of a chain, and those
//    among the folders of each step — and the UserError names the link, its owner, its
//    folder and the fix (remove the link, or write into a folder you own);
//  - anything else — a directory, a device such as /dev/null, a FIFO, a socket, a loop of
//    links — is refused with a UserError that names the path and what it is.
// Why (issue 39): renaming over the path replaced a link, a FIFO or a device with a
// regular file and exited 0 (as root, `--json /dev/null` replaced /dev/null itself);
// writing into such a file instead would not be whole either. Why the link rule (issue
// 48): cnnscale resolves a link itself and renames onto its final target, so the kernel
// never sees the link and its rule cannot protect; another user's link in /tmp made
// root's `--json /tmp/x.json` replace root's own private file (and widen it to 0644).
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace cnnscale {

// Throws UserError naming the path and the OS's reason on failure, and for a path that
// the rule above refuses.
void write_file_atomic(const std::string& path, const std::string& content);
void write_file_atomic(const std::string& path, const void* data, size_t size);

// The file write_file_atomic(path) replaces: path with every symbolic link on it (at the
// end or among its folders) resolved, which may not exist yet. UserError "cannot write
// 'PATH': …" for a path the rule refuses.
std::string output_target(const std::string& path);

// Before the work whose result goes to `path` (a benchmark, a training), so that a bad
// path costs nothing: UserError naming `option` ("--json") and the path when the rule
// refuses it, or when the folder it would be created in does not exist or is not
// writable. Write errors (a full disk) can still happen at the end.
void check_output_file(const std::string& path, const std::string& option);

// `path` with every symbolic link on it resolved, as the kernel resolves it, each link
// checked by the link rule above: UserError "<what> 'PATH': it is (or goes through) a
// symbolic link …" when one is refused. Any kind of file (or none) may be at the end.
std::string resolve_links(const std::string& path, const std::string& what);

// A folder whose files cnnscale writes one by one (a run directory, report --output
// DIR) must belong to the caller or to root: its owner can rename, replace or link any
// name in it at any time. UserError "<what> 'DIR' belongs to USER (uid N), not to you
// (…): …; <fix>" otherwise; nothing when dir does not exist.
void check_own_directory(const std::string& dir, const std::string& what, const std::string& fix);

// "nobody (uid 65534)", or "uid 12345" for a uid without a name.
std::string describe_uid(uid_t uid);

// Creates and opens (write-only, close-on-exec) a new temporary file
// "<beside>.tmp.<host>.<pid>.<random>" with O_CREAT | O_EXCL | O_NOFOLLOW and `mode`
// (less the umask), drawing a new <random> on EEXIST (100 tries). Returns the file
// descriptor and sets *path, or returns -1 with errno set.
int create_temporary(const std::string& beside, mode_t mode, std::string* path);

// Tests only: the source of create_temporary's <random> part (nullptr: getrandom).
void set_temporary_suffix_source(std::function<std::string()> source);

// Removes dir's temporary files whose writer is gone: "<name>.tmp.<host>.<pid>.<random>"
// and the older "<name>.tmp.<host>.<pid>" and "<name>.tmp.<pid>" (this host's). Only
// regular files (a symbolic link is neither followed nor removed), only files written on
// this host (a run directory on a shared file system may have live writers on other
// hosts) and only when no process <pid> exists here. Returns the names removed.
std::vector<std::string> remove_stale_temporaries(const std::string& dir);

// Appends `bytes` to the file open as fd, whole or not at all: a short or failed write is
// cut back off (shrinking needs no space), so the next append does not continue a torn
// record. Returns 0, or the errno of the failure (ENOSPC for a write of 0 bytes).
int append_whole(int fd, const std::string& bytes);

// fsyncs a directory (after a rename inside it); errors are ignored.
void fsync_directory(const std::string& dir);

}  // namespace cnnscale
