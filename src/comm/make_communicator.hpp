// make_communicator.hpp — picks and builds the communicator for --backend.
// auto: NCCL when this build has CUDA and every rank is bound to a GPU, else MPI; gloo
// when the ranks met at a rendezvous store (start_world decides: torchrun/TF_CONFIG).
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "launch/bootstrap.hpp"

namespace cnnscale {

Backend parse_backend(const std::string& s);  // throws UserError on anything else

// The backend auto resolves to, agreed by all ranks (collective).
Backend resolve_backend(Backend requested, const ProcessContext& ctx);

// timeout_s: the gloo backend's deadline for every collective (--collective-timeout).
std::unique_ptr<Communicator> make_communicator(Backend requested, const ProcessContext& ctx,
                                                double timeout_s = 300);

// A communicator over one level of the hierarchical gradient sum (comm/shm_allreduce.hpp),
// for `cnnscale allreduce --level`: "node" = the ranks of this rank's node; "cross" = the
// ranks with this rank's local rank, one per node (every local rank gets its own, and all
// run at once, as in training); "world" = make_communicator. Collective over the world.
// UserError for another level.
std::unique_ptr<Communicator> make_level_communicator(Backend requested, const ProcessContext& ctx,
                                                      const std::string& level);

}  // namespace cnnscale
