// gloo_communicator.hpp — the gloo backend: the data plane (Communicator) and the
// control plane's transport (ControlTransport) over Gloo, PyTorch's own CPU collective
// library, on TCP between processes that met at the rendezvous store
// (launch/rendezvous_store.hpp) — ranks started by torchrun-style launchers or from
// TF_CONFIG, which share no MPI job.
//
// Each plane has its own Gloo context (its own TCP connections, keys under "data/" and
// "control/" in the store), so a control collective never waits behind a gradient bucket.
// Gloo's address lists are stored compacted (one address, then 2 bytes per further peer;
// gloo_communicator.cpp), so the store of a world of W holds ~4·W² bytes of them, not
// 272·W² (issue 39 item 1).
// Data plane: one worker thread runs the collectives in the order they were started
// (every rank starts them in the same order), so allreduce_sum_async() returns at once
// and the sum runs while backward goes on, as MPI's non-blocking sums do; blocking calls
// (allreduce_sum, broadcast, barrier) wait for the sums in flight, then run on the
// calling thread. Sums: Gloo's ring allreduce
// (CNNSCALE_GLOO_ALGORITHM=bcube for BCube); every element is reduced on one rank and
// sent to the others, so all ranks hold bitwise the same sum (--check-replicas holds).
// bfloat16 sums accumulate in fp32 and round to nearest, as the MPI backend's.
//
// Never a hang: every Gloo operation has the --collective-timeout deadline; a peer that
// stops or never answers ends the wait with a UserError naming the rank and the fix.
#pragma once
#include <memory>
#include <string>

#include "comm/communicator.hpp"
#include "comm/control_comm.hpp"
#include "launch/rendezvous_store.hpp"

namespace gloo {
class Context;
}

namespace cnnscale {

// A Gloo context of all ranks over TCP, its addresses exchanged under `prefix` in the
// store. Collective. UserError when a rank does not arrive within timeout_s.
std::shared_ptr<gloo::Context> make_gloo_context(RendezvousStore& store, const std::string& prefix, int rank, int size,
                                                 double timeout_s);

std::unique_ptr<Communicator> make_gloo_communicator(std::shared_ptr<gloo::Context> ctx, double timeout_s);
std::unique_ptr<ControlTransport> make_gloo_control(std::shared_ptr<gloo::Context> ctx, double timeout_s);

}  // namespace cnnscale
