// world.cpp — see world.hpp.
#include "comm/world.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "comm/staged_communicator.hpp"
#include "util/log.hpp"

#include "comm/gloo_communicator.hpp"
#include "comm/make_communicator.hpp"
#include "launch/detect_launcher.hpp"
#include "util/env.hpp"
#include "util/error.hpp"

namespace cnnscale {

DeviceRequest parse_device(const std::string& s) {
  if (s == "auto") return DeviceRequest::automatic;
  if (s == "cuda") return DeviceRequest::cuda;
  if (s == "cpu") return DeviceRequest::cpu;
  fail("--device takes auto, cuda or cpu, not '", s, "'");
}

const char* device_request_name(DeviceRequest d) {
  switch (d) {
    case DeviceRequest::cuda: return "cuda";
    case DeviceRequest::cpu: return "cpu";
    default: return "auto";
  }
}

namespace {

// --device cuda over a host transport: every rank has a GPU (else a CollectiveError naming
// the first rank without one and its reason), then the staged data plane; rank 0 says once
// that it runs and how many ranks share a GPU.
void stage_on_gpus(World& w) {
  Communicator& host = *w.comm;
  const int size = host.size(), rank = host.rank();
  std::vector<float> missing(static_cast<size_t>(size), 0.f), sharing(static_cast<size_t>(size), 0.f);
  missing[static_cast<size_t>(rank)] = w.ctx.device < 0 ? 1.f : 0.f;
  sharing[static_cast<size_t>(rank)] = static_cast<float>(w.ctx.gpu_sharing);
  host.allreduce_sum(missing.data(), missing.size(), DType::f32);
  host.allreduce_sum(sharing.data(), sharing.size(), DType::f32);
  int first = -1;
  for (int r = 0; r < size && first < 0; ++r)
    if (missing[static_cast<size_t>(r)] > 0) first = r;
  if (first >= 0) {
    std::vector<char> why(1024, 0);  // that rank's reason, to every rank
    if (rank == first) {
      const std::string t = w.ctx.host + ": " + (w.ctx.gpu_problem.empty() ? "no GPU was bound to it" : w.ctx.gpu_problem);
      t.copy(why.data(), why.size() - 1);
    }
    host.broadcast(why.data(), why.size(), first);
    fail_collective(rank, "--device cuda needs a GPU on every rank, but rank ", first, " on ", why.data(),
                    ". Run on GPU nodes, or train on the CPU with --device cpu");
  }
  int most = 1;
  for (float v : sharing) most = std::max(most, static_cast<int>(v));
  if (rank == 0)
    log_info(std::string("GPU ranks over the host data plane (") + backend_name(host.backend()) +
             "): gradients and broadcasts staged through pinned host memory" +
             (most > 1 ? "; up to " + std::to_string(most) + " ranks share one GPU (each its own CUDA context and stream)"
                       : std::string()) +
             " (docs/gpu.md, \"GPU ranks over a host data plane\"; not yet run on a GPU)");
  w.comm = make_staged_communicator(std::move(w.comm), make_cuda_copier(w.ctx.device, w.ctx.gpu_sharing));
}

}  // namespace

World start_world(const WorldOptions& opts) {
  const bool host_backend = opts.backend == Backend::mpi || opts.backend == Backend::gloo;
  if (opts.device == DeviceRequest::cpu && opts.backend == Backend::nccl)
    fail("--device cpu with --backend nccl: NCCL sums device buffers; use --backend mpi (srun, mpirun) or gloo "
         "(torchrun-style launches) with --device cpu, or --device cuda");
  const bool staged = opts.device == DeviceRequest::cuda && host_backend;
  BootstrapOptions bo;
  // A GPU is bound for NCCL (auto, nccl) unless --device cpu, and for --device cuda.
  bo.use_gpu = opts.device == DeviceRequest::cuda || (opts.device == DeviceRequest::automatic && !host_backend);
  bo.share_gpu = staged;
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
  // --device cuda with --backend auto: NCCL, which says which rank has no GPU; --device
  // cpu with auto: the host transport, without auto's "GPUs seen but not used" warning.
  Backend requested = opts.backend;
  const bool device_cuda_nccl = opts.device == DeviceRequest::cuda && opts.backend == Backend::automatic;
  if (device_cuda_nccl) requested = Backend::nccl;
  if (opts.device == DeviceRequest::cpu && opts.backend == Backend::automatic)
    requested = w.ctx.store ? Backend::gloo : Backend::mpi;
  if (w.ctx.store) {
    // Data plane: NCCL when every rank has a GPU of its own (auto, nccl), else Gloo;
    // the control plane is always Gloo on the CPU.
    w.comm = make_communicator(requested, w.ctx, opts.timeout_s, device_cuda_nccl);
    w.control = std::make_unique<ControlComm>(
        make_gloo_control(make_gloo_context(*w.ctx.store, "control", w.ctx.rank, w.ctx.size, opts.timeout_s),
                          opts.timeout_s));
  } else {
    // NCCL (and the GPU model) when every rank has a GPU, else MPI.
    w.comm = make_communicator(requested, w.ctx, opts.timeout_s, device_cuda_nccl);
    w.control = std::make_unique<ControlComm>(MPI_COMM_WORLD);
  }
  if (staged) stage_on_gpus(w);
  if (!w.comm->device_buffers()) {  // the CPU model: no GPU is used
    w.ctx.device = -1;
    w.ctx.device_label = "cpu";
  }
  return w;
}

}  // namespace cnnscale
