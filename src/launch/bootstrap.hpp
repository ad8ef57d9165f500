// bootstrap.hpp — turns "a process was started" into "rank r of an MPI world of W,
// on node n, bound to device d", checking the launcher against MPI.
//
// Order: detect_launcher (env) → check_pmi_available → PMIx_Get when under PMIx →
// MPI_Init_thread → compare MPI's rank/size with the launcher's → node topology from
// MPI (shared-memory split, distinct hosts) → device choice among local ranks (their
// GPU UUIDs exchanged over the node communicator, launch/device_binding.hpp).
// Any disagreement throws UserError on every rank (each rank sees the same facts).
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "launch/device_binding.hpp"
#include "launch/launch_info.hpp"
#include "launch/rendezvous_store.hpp"

namespace cnnscale {

struct BootstrapOptions {
  bool use_gpu = true;  // false: always bind the CPU (e.g. --backend mpi --device cpu)
  // Ranks may share a GPU (--device cuda over a host data plane, --backend mpi or gloo:
  // device_binding.hpp choose_device's allow_sharing).
  bool share_gpu = false;
  // Join through the rendezvous store (launch/rendezvous_bootstrap.cpp) instead of
  // MPI: the gloo backend, or NCCL with a GPU on every rank. MPI is still initialised, as a singleton under torchrun or
  // TF_CONFIG (its world of 1 is then only this process).
  bool rendezvous = false;
  double timeout_s = 300;        // --collective-timeout: the rendezvous' deadline
  // --run-dir, for the rendezvous token file (launch/rendezvous_token.hpp); "" for none.
  std::string run_dir;
};

struct ProcessContext {
  LaunchInfo launch;       // what the launcher said (checked against MPI)
  int rank = 0, size = 1;  // MPI_COMM_WORLD
  int local_rank = 0, local_size = 1;
  int node_id = 0, num_nodes = 1;
  std::string host;
  int device = -1;  // CUDA ordinal, -1 = CPU
  std::string device_label = "cpu";
  std::string device_id;               // the bound GPU's UUID (else "pci:<bus id>"), "" for the CPU
  int gpu_sharing = 1;                 // local ranks on this rank's GPU (> 1 only with share_gpu)
  std::string gpu_problem;             // why this rank has no GPU (launch/gpu_diagnosis.hpp explain_no_gpu);
                                       // "" when it has one or use_gpu is false
  std::string cuda_error;              // cudaGetErrorString of device enumeration, "" when it worked
  std::vector<std::string> gpu_hints;  // signs of GPUs outside CUDA (gpu_presence_hints)
  int mpi_thread_level = 0;
  MPI_Comm local_comm = MPI_COMM_NULL;  // ranks on this node (MPI_COMM_NULL after a rendezvous)
  std::shared_ptr<RendezvousStore> store;  // after a rendezvous: the store the ranks met at
};

// Initialises MPI (once) and returns the context. Throws UserError on a bad launch.
ProcessContext bootstrap(const BootstrapOptions& opts);

// True for the launchers whose processes share no MPI job (torchrun-style, TF_CONFIG):
// --backend auto and nccl join them through the rendezvous store (then NCCL or Gloo).
bool launcher_needs_rendezvous(const LaunchInfo& info);

// bootstrap() for opts.rendezvous: rank and size from the launcher, the store at its
// address (MASTER_ADDR/MASTER_PORT or TF_CONFIG), every rank announced there, node
// topology from the hosts; with opts.use_gpu (--backend auto or nccl) a GPU per rank as
// under MPI (device_binding.hpp; the views exchanged through the store; local rank =
// LOCAL_RANK where the host's ranks carry 0..n-1, else their order on the host), else
// the CPU. UserError under an MPI launcher (a real MPI world).
ProcessContext bootstrap_rendezvous(ProcessContext ctx, const BootstrapOptions& opts);

// Records choose_device's result in ctx (device, id, sharing text, label): the MPI and
// the rendezvous bootstraps alike.
void apply_device_choice(const DeviceChoice& choice, ProcessContext& ctx);

// Every rank's device view (physical GPU ids by ordinal) over comm, indexed by rank in
// comm: the ids joined with '\n', exchanged with Allgatherv (collective).
std::vector<VisibleDevices> gather_views(const VisibleDevices& mine, MPI_Comm comm);

// Parses the environment only (no MPI): used to decide which rank prints errors
// that happen before bootstrap. Returns 0 when the environment says nothing usable.
int launcher_rank_or_zero();

// Compares the launcher's view with MPI's; throws UserError describing the mismatch.
void check_launch_against_mpi(const LaunchInfo& info, int mpi_rank, int mpi_size);

// MPI_Finalize if initialised and not yet finalised.
void finalize_mpi();

// True between MPI_Init and MPI_Finalize.
bool mpi_active();

// MPI_Init_thread asking for MPI_THREAD_MULTIPLE unless MPI is already up; returns the
// thread level MPI provides (the progress thread runs only with MULTIPLE).
int start_mpi_threaded();

}  // namespace cnnscale
