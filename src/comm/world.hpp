// world.hpp — start_world(): the one way a command joins the job. Bootstraps the
// process (launch/bootstrap.hpp: launcher, MPI, node topology, device), then builds the
// two planes every collective of cnnscale goes over:
//   comm     the data plane (communicator.hpp): gradients and parameter broadcasts, MPI
//            on host buffers or NCCL on device buffers, as --backend resolves;
//   control  the control plane (control_comm.hpp): small host-side agreements between
//            ranks under the watchdog.
// Commands hand the World to what they run (the Trainer, the allreduce benchmark), which
// then never touches MPI_COMM_WORLD itself.
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "comm/control_comm.hpp"
#include "launch/bootstrap.hpp"

namespace cnnscale {

// Where a rank trains (--device): cuda, cpu, or automatic. automatic keeps the GPU to
// NCCL (a GPU of its own per rank, else the CPU, as --backend auto decides; --backend mpi
// or gloo: the CPU). cuda with --backend mpi or gloo: GPU ranks over a host data plane
// (comm/staged_communicator.hpp; ranks may share a GPU; not yet run on a GPU, so never
// chosen by automatic). cpu: the CPU model whatever GPUs there are.
enum class DeviceRequest { automatic, cuda, cpu };
DeviceRequest parse_device(const std::string& s);  // auto | cuda | cpu, else UserError
const char* device_request_name(DeviceRequest d);

struct WorldOptions {
  Backend backend = Backend::automatic;  // --backend
  DeviceRequest device = DeviceRequest::automatic;  // --device
  double timeout_s = 300;                // --collective-timeout: the rendezvous' and Gloo's deadline
  std::string run_dir;                   // --run-dir: where rank 0 puts the rendezvous token file
};

struct World {
  ProcessContext ctx;
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<ControlComm> control;
};

// --backend gloo, or auto under a launcher whose processes share no MPI job (torchrun-
// style variables, TF_CONFIG: launch/bootstrap.hpp launcher_needs_rendezvous): the ranks
// meet at the rendezvous store and both planes go over Gloo (comm/gloo_communicator.hpp).
// --device cuda with --backend mpi or gloo: the data plane is that host transport
// wrapped by make_staged_communicator (device buffers), every rank bound to a GPU (a
// CollectiveError naming the first rank without one and why), ranks allowed to share one
// (rank 0 says so once).
// Collective over every process of the launch. Throws UserError on a bad launch or a
// backend that cannot be had.
World start_world(const WorldOptions& opts);

}  // namespace cnnscale
