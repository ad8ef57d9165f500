// bucket_reducer.hpp — BucketReducer: sums one buffer over all ranks, in place, in
// consecutive buckets that become final one after another (gradients during
// backward), so that the sums overlap with the computation still producing the rest.
// One interface, two transports:
//   - make_allreduce_reducer: one non-blocking allreduce of the Communicator per bucket
//     (MPI on host buffers, NCCL on device buffers);
//   - make_node_shared_reducer: ranks of a node sum in node-shared memory, MPI only
//     between nodes (ShmAllreduce, shm_allreduce.hpp); the buffer is the reducer's own
//     window, which the model must write its gradients into (Model::adopt_grad_storage).
// Per round: ready(i) for every bucket in order (as each becomes final), progress() as
// often as convenient, then finish(); the next round may start right after.
// Device-ordered reducers (NCCL on device buffers: device_ordered()) may instead end a
// round with end_round(), which does not wait: the device queue that reads the sums
// waits for the communicator's queue on the device (Model::wait_for), and complete()
// checks the round on the host later, when the device has long passed it.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace cnnscale {

struct Bucket {
  size_t begin = 0, end = 0;  // element offsets into the buffer
};

// One bucket's sum in a round, in seconds of std::chrono::steady_clock (since its
// epoch): started = ready() (the sum was launched or queued), summed = first seen
// complete (MPI: PendingReduce::times; NCCL: the host's wait for it returned; node
// shared memory: this rank's slice was summed, or the end of finish() for the rest).
struct BucketSpan {
  double started = 0, summed = 0;
};

class BucketReducer {
 public:
  virtual ~BucketReducer() = default;
  // Bucket i is final on this rank: start (or queue) its sum.
  virtual void ready(size_t i) = 0;
  // Lets sums in flight advance; never waits.
  virtual void progress() = 0;
  // Every bucket is ready(): blocks until the whole buffer holds the sum over ranks.
  virtual void finish() = 0;
  // True when the sums run in order on the communicator's device queue
  // (Communicator::stream(): NCCL on device buffers), so that a device queue that waits
  // for that queue reads the sums with no host wait at all.
  virtual bool device_ordered() const { return false; }
  // Every bucket is ready(): ends the round. A device-ordered reducer returns at once,
  // the sums still in flight, and the next round may start; complete() then waits for
  // them on the host (polling the transport's errors). At most one round stays in flight:
  // ending another first completes the older one. Other reducers: finish().
  virtual void end_round() { finish(); }
  // Waits for the round end_round() left in flight, if any (no wait once the device has
  // passed it), and sets last_spans() / last_comm_seconds() for it.
  virtual void complete() {}
  // How buckets are summed, for logs and run.json: "MPI", "NCCL",
  // "node shared memory (2 ranks/node)", "... + MPI across 2 nodes".
  virtual std::string method() const = 0;
  // After finish(): seconds from the first bucket's start to the last sum's completion in
  // that round (communication time, hidden behind computation or not); negative where
  // the transport cannot tell (NCCL). Node-shared memory: first ready() to the end of
  // finish() (an upper bound).
  virtual double last_comm_seconds() const { return -1; }
  // After finish(): that round's BucketSpan of each bucket, in bucket order (--timeline).
  const std::vector<BucketSpan>& last_spans() const { return spans_; }

 protected:
  std::vector<BucketSpan> spans_;
};

// Non-blocking fp32 allreduces of `comm` over buffer[begin, end) of each bucket.
// buffer: host or device memory, as comm.device_buffers() says. (A bf16 wire would need
// a converted copy of each bucket: the sums are of the float buffer itself.)
std::unique_ptr<BucketReducer> make_allreduce_reducer(Communicator& comm, float* buffer, std::vector<Bucket> buckets);

// A BucketReducer over node-shared memory that owns its buffer.
class NodeSharedReducer : public BucketReducer {
 public:
  // This rank's `count` floats: the buffer whose buckets are summed.
  virtual float* buffer() const = 0;
};

// A node-shared reducer over `count` floats with these buckets, when the world has more
// than one rank, `comm` is MPI (host buffers), every node runs the same number (> 1) of
// ranks and CNNSCALE_SHM_ALLREDUCE is not 0 on any rank; otherwise nullptr, and *why
// says which of these failed. Collective over comm.
std::unique_ptr<NodeSharedReducer> make_node_shared_reducer(Communicator& comm, size_t count,
                                                            const std::vector<Bucket>& buckets, std::string* why);

}  // namespace cnnscale
