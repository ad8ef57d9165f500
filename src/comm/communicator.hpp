// communicator.hpp — the data plane: the one interface training and benchmarks use to
// move gradients and parameters between ranks. Two implementations: MPI (host buffers)
// and NCCL (device buffers). All reductions are in-place sums; callers scale for
// averages. (Small host-side agreements between ranks go over the control plane,
// comm/control_comm.hpp; gradient buckets over a BucketReducer, comm/bucket_reducer.hpp.)
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cnnscale {

enum class DType { f32, bf16 };

// A transport. `automatic` is only ever a request (--backend auto): a communicator's
// backend() is mpi, nccl or gloo (CPU ranks joined through a rendezvous store,
// comm/gloo_communicator.hpp).
enum class Backend { automatic, mpi, nccl, gloo };
const char* backend_name(Backend b);  // "auto", "mpi", "nccl", "gloo"

inline size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }
inline const char* dtype_name(DType t) { return t == DType::f32 ? "float" : "bfloat16"; }

// A reduction in flight. wait() blocks until the buffer holds the sum.
class PendingReduce {
 public:
  virtual ~PendingReduce() = default;
  virtual void wait() = 0;
  // After wait(): when the sum was started and when it was first seen complete, in
  // seconds of std::chrono::steady_clock; false where the transport cannot tell (NCCL).
  // (MPI: completion is seen by the progress thread, within one progress interval, or
  // by wait() itself; the difference is the sum's time in flight, hidden or not.)
  virtual bool times(double* started, double* completed) const {
    (void)started;
    (void)completed;
    return false;
  }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual Backend backend() const = 0;            // mpi, nccl or gloo
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual bool device_buffers() const = 0;        // true: buffers are CUDA device pointers
  virtual void allreduce_sum(void* buf, size_t count, DType t) = 0;
  // Starts a sum; the buffer must not be touched until wait() returns.
  virtual std::unique_ptr<PendingReduce> allreduce_sum_async(void* buf, size_t count, DType t) = 0;
  virtual void broadcast(void* buf, size_t bytes, int root) = 0;
  // Broadcasts root's floats base[b, e) for every (b, e) in float_ranges (offsets in
  // floats from base; ranges disjoint, each rank passes the same list); the floats
  // outside the ranges are not touched. For many small ranges, e.g. the batch-norm
  // running statistics scattered through a model's parameters (resnet20: 21 ranges),
  // the transport policy lives here, not in the caller:
  //  - host communicators (this default: MPI, Gloo) pack the ranges into one message, one
  //    broadcast, and unpack it; returns when base holds root's values;
  //  - a device communicator (NCCL) only enqueues: one broadcast per range, all in one
  //    ncclGroupStart/ncclGroupEnd on stream(), and returns without waiting on the host.
  //    The caller orders the writers of base before stream() (Model::order_before) and
  //    its readers after it (Model::wait_for(stream())); a later wait on the
  //    communicator (synchronize, a blocking collective) reports its errors.
  virtual void broadcast_ranges(void* base, const std::vector<std::pair<size_t, size_t>>& float_ranges, int root);
  virtual void barrier() = 0;
  // Lets reductions in flight advance (MPI's non-blocking collectives progress only
  // inside MPI calls); the training loop calls it between layers. No-op for NCCL.
  virtual void progress() {}
  // Waits for outstanding device work (NCCL stream); no-op for MPI.
  virtual void synchronize() {}
  // Never waits: ends the job with the transport's message when its device work has
  // failed asynchronously (NCCL: ncclCommGetAsyncError, a peer or the network failed
  // while a collective ran on the device; the communicator is aborted first). For the
  // host's waits on device queues that wait for this communicator's (a device model's
  // loss wait, StepContext::while_waiting). No-op for host transports (MPI, Gloo), whose
  // waits report their errors themselves.
  virtual void check_async_error(const char* /*what*/) {}
  // Gives up on the transport after an error on this rank alone (the Trainer calls it
  // when destroyed while an exception unwinds, before its sums in flight are destroyed):
  // nothing that could wait for ranks still training follows, so the error reaches
  // main() and its MPI_Abort in seconds. After abort() only destruction is valid;
  // idempotent. NCCL: ncclCommAbort, then no pending sum waits and no collective
  // teardown (its destructors also abort by themselves while an exception unwinds).
  // MPI: nothing: a sum this rank started is still waited for, as MPI writes into its
  // buffer until it completes, and the peers start every bucket this rank started before
  // they can block (node-shared memory skips its collective frees while unwinding).
  virtual void abort() {}
  // The device queue the communicator works on (NCCL's cudaStream_t, the staged host
  // plane's copy stream), nullptr for MPI. A device model orders its gradients before it
  // with Model::order_before(stream()).
  virtual void* stream() const { return nullptr; }
  // True when a started sum completes on stream() without the host (NCCL): the caller may
  // order its readers after stream() and never wait (a device-ordered round,
  // comm/bucket_reducer.hpp). False for host transports and for the staged host plane
  // (comm/staged_communicator.hpp), whose sums finish in PendingReduce::wait().
  virtual bool sums_on_stream() const { return stream() != nullptr; }
 private:
  std::vector<float> ranges_scratch_;  // broadcast_ranges' packed message, reused every step
};

}  // namespace cnnscale
