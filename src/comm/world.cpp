// world.cpp — see world.hpp.
#include "comm/world.hpp"

#include "comm/gloo_communicator.hpp"
#include "comm/make_communicator.hpp"
#include "launch/detect_launcher.hpp"
#include "util/env.hpp"
#include "util/error.hpp"

namespace cnnscale {

World start_world(const WorldOptions& opts) {
  BootstrapOptions bo;
  bo.use_gpu = opts.backend != Backend::mpi && opts.backend != Backend::gloo;  // gloo: the CPU
  bo.timeout_s = opts.timeout_s;
  bo.run_dir = opts.run_dir;
  if (opts.backend == Backend::gloo) {
    bo.rendezvous = true;
  } else if (opts.backend != Backend::mpi) {  // auto or nccl
    try {
      bo.rendezvous = launcher_needs_rendezvous(detect_launcher(process_env()));
    } catch (const UserError&) {
      // bootstrap() reports a malformed environment
    }
  }  // --backend mpi under torchrun: bootstrap() explains that MPI sees a world of 1
  World w;
  w.ctx = bootstrap(bo);
  if (w.ctx.store) {
    // Data plane: NCCL when every rank has a GPU of its own (auto, nccl), else Gloo;
    // the control plane is always Gloo on the CPU.
    w.comm = make_communicator(opts.backend, w.ctx, opts.timeout_s);
    if (w.comm->backend() != Backend::nccl) {  // the CPU model: no GPU is used
      w.ctx.device = -1;
      w.ctx.device_label = "cpu";
    }
    w.control = std::make_unique<ControlComm>(
        make_gloo_control(make_gloo_context(*w.ctx.store, "control", w.ctx.rank, w.ctx.size, opts.timeout_s),
                          opts.timeout_s));
    return w;
  }
  // NCCL (and the GPU model) when every rank has a GPU, else MPI.
  w.comm = make_communicator(opts.backend, w.ctx);
  w.control = std::make_unique<ControlComm>(MPI_COMM_WORLD);
  return w;
}

}  // namespace cnnscale
