// rank_memory.hpp — check_memory() (util/memory.hpp) on every rank of a communicator
// at once, before a large allocation: the rank with the least memory available
// decides, rank 0 prints its "out of memory while …" message once (naming that rank
// and host), and every rank leaves through the same CollectiveError, so no rank is
// left waiting and 512 ranks do not print 512 lines.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <string>

namespace cnnscale {

// Collective over comm. Throws CollectiveError on every rank when any rank cannot get
// `bytes` more memory.
void check_memory_on_all_ranks(MPI_Comm comm, const std::string& what, uint64_t bytes, const std::string& hint);

}  // namespace cnnscale
