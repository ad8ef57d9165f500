// shm_allreduce.hpp — ShmAllreduce: an in-place sum over all ranks of a float buffer
// that lives in node-shared memory (MPI_Win_allocate_shared), in segments that become
// ready one after another (gradient buckets during backward).
//
// Why: with one core per rank, every byte an allreduce moves costs the core that also
// runs backward. Open MPI's non-blocking allreduce between ranks of one node copies
// each message through the kernel (CMA) into a temporary buffer and, for in-place sums
// on fewer than 4 ranks, has one rank do all of the summing (binomial tree). Here the
// ranks of a node read each other's buffers directly:
//   1. reduce-scatter: local rank k sums slice k of a segment over all local ranks,
//      in local-rank order, into its own buffer (reads L slices, writes one);
//   2. across nodes (when there is more than one): an MPI_Iallreduce of slice k among
//      the ranks with local rank k (one communicator per local rank; the classic 2-D
//      hierarchical allreduce);
//   3. all-gather: every rank copies the other slices from their owners' buffers.
// For 2 ranks on a node that is 12 bytes of memory traffic per gradient float per rank
// (Open MPI: 24 on the rank that sums), no system calls and no temporary buffers.
// Every slice is summed exactly once and copied, so all ranks end bitwise identical;
// for 2 ranks per node the result equals a + b, as with MPI.
//
// Synchronisation is through per-segment sequence numbers in the shared window (C++
// atomics with acquire/release, lock-free and so usable between processes); waits
// spin briefly, then yield the core (oversubscribed ranks keep making progress).
// A rank does not overwrite its buffer for the next step before all ranks of its node
// have finished reading it (finish() ends with a node barrier on the same counters).
//
// Usable when every node runs the same number of ranks; create() says why not
// otherwise, and the caller keeps using MPI (comm/bucket_reducer.hpp does).
#pragma once
#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace cnnscale {

class ShmAllreduce {
 public:
  // Collective over `world`. segments: consecutive [begin, end) ranges covering the
  // buffer of `count` floats, in the order they will become ready. Returns nullptr
  // and sets *why when the node layout does not allow it (single rank, nodes with
  // different rank counts). node: the ranks that share memory; by default this rank's
  // node (MPI_COMM_TYPE_SHARED). Tests pass smaller groups of one node's ranks to act
  // as several nodes (each group's ranks must share memory).
  static std::unique_ptr<ShmAllreduce> create(MPI_Comm world, size_t count,
                                              std::vector<std::pair<size_t, size_t>> segments, std::string* why,
                                              MPI_Comm node = MPI_COMM_NULL);
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  float* buffer() const { return mine_; }  // this rank's `count` floats, 64-byte aligned
  int local_size() const { return local_size_; }
  int nodes() const { return nodes_; }

  // Segment i of this rank's buffer is final for this round; sums whatever is now
  // possible without waiting.
  void ready(size_t i);
  // Sums what has become possible; never waits.
  void progress();
  // Blocks until every segment holds the sum over all ranks (all segments must have
  // been marked ready), then until no rank of the node still reads this buffer.
  void finish();
  // Segments, from the first, whose slice this rank has summed over its node in this
  // round (with one node: its share of the sum is done); 0 again after finish().
  size_t segments_reduced() const { return next_reduce_; }

 private:
  ShmAllreduce() = default;
  std::pair<size_t, size_t> slice(size_t seg, int k) const;
  bool try_reduce(size_t seg);
  void complete_cross();
  // Rank k's control block: one cache line per counter. Counter 0: the last round
  // this rank finished; 1 + i: the round in which segment i became ready; 1 + n + i:
  // the round in which this rank's slice of segment i holds the global sum.
  std::atomic<uint64_t>& flag(int k, size_t idx) const {
    return *reinterpret_cast<std::atomic<uint64_t>*>(ctrl_[static_cast<size_t>(k)] + idx * 64);
  }
  std::atomic<uint64_t>& done(int k) const { return flag(k, 0); }
  std::atomic<uint64_t>& ready_flag(int k, size_t seg) const { return flag(k, 1 + seg); }
  std::atomic<uint64_t>& reduced_flag(int k, size_t seg) const { return flag(k, 1 + segs_.size() + seg); }

  MPI_Comm node_ = MPI_COMM_NULL, cross_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  int local_rank_ = 0, local_size_ = 1, nodes_ = 1;
  std::vector<std::pair<size_t, size_t>> segs_;
  std::vector<char*> ctrl_;          // every local rank's control block
  std::vector<float*> bufs_;         // every local rank's buffer
  float* mine_ = nullptr;
  uint64_t round_ = 1;
  size_t next_reduce_ = 0;           // first segment not yet summed here
  std::vector<MPI_Request> cross_req_;  // per segment, across nodes
};

}  // namespace cnnscale
