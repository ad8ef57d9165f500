// world.cpp — see world.hpp.
#include "comm/world.hpp"

#include "comm/make_communicator.hpp"

namespace cnnscale {

World start_world(const WorldOptions& opts) {
  BootstrapOptions bo;
  bo.use_gpu = opts.backend != Backend::mpi;
  bo.allow_gpu_sharing = opts.allow_gpu_sharing;
  World w;
  w.ctx = bootstrap(bo);
  // NCCL (and the GPU model) when every rank has a GPU, else MPI.
  w.comm = make_communicator(opts.backend, w.ctx);
  w.control = std::make_unique<ControlComm>(MPI_COMM_WORLD);
  return w;
}

}  // namespace cnnscale
