// make_communicator.hpp — picks and builds the communicator for --backend.
// auto: NCCL when this build has CUDA and every rank is bound to a GPU, else MPI.
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "launch/bootstrap.hpp"

namespace cnnscale {

Backend parse_backend(const std::string& s);  // throws UserError on anything else

// The backend auto resolves to, agreed by all ranks (collective).
Backend resolve_backend(Backend requested, const ProcessContext& ctx);

std::unique_ptr<Communicator> make_communicator(Backend requested, const ProcessContext& ctx);

}  // namespace cnnscale
