// atomic_file.hpp — write a whole file so that readers see either the old file or
// the complete new one: write to "<path>.tmp.<pid>", fsync, rename, fsync the folder.
#pragma once
#include <cstddef>
#include <string>

namespace cnnscale {

// Throws UserError naming the path and the OS's reason on failure.
void write_file_atomic(const std::string& path, const std::string& content);
void write_file_atomic(const std::string& path, const void* data, size_t size);

// fsyncs a directory (after a rename inside it); errors are ignored.
void fsync_directory(const std::string& dir);

}  // namespace cnnscale
