// hdf5_lock.hpp — the process-wide lock around HDF5 calls.
//
// The HDF5 library cnnscale links (the parallel build) is not thread-safe. Every
// thread that calls into HDF5 while another thread may do so too (the data reader's
// prefetch thread, checkpoint writing on the training thread) holds this lock for the
// duration of its HDF5 calls. It is recursive, so helpers may nest.
#pragma once
#include <mutex>

namespace cnnscale {

std::recursive_mutex& hdf5_mutex();

using Hdf5Lock = std::lock_guard<std::recursive_mutex>;

}  // namespace cnnscale
