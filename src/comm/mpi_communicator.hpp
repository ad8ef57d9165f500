// mpi_communicator.hpp — Communicator over MPI on host buffers. Uses its own
// duplicate of the given communicator so its traffic never mixes with other MPI
// calls. bfloat16 sums use a user-defined MPI_Op (fp32 accumulate, round to nearest).
// MPI counts are int: buffers of more than INT_MAX elements (broadcasts: bytes) are
// sent in pieces of at most `max_piece` (a 785 M-parameter model's 3.1 GB broadcast is
// two calls), so any size a rank can hold works.
#pragma once
#include <mpi.h>

#include <climits>
#include <vector>

#include "comm/communicator.hpp"

namespace cnnscale {

class MpiCommunicator final : public Communicator {
 public:
  // max_piece: elements per MPI call (at most INT_MAX; tests lower it to exercise the split).
  explicit MpiCommunicator(MPI_Comm parent, size_t max_piece = INT_MAX);
  ~MpiCommunicator() override;
  std::string backend() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool device_buffers() const override { return false; }
  void allreduce_sum(void* buf, size_t count, DType t) override;
  std::unique_ptr<PendingReduce> allreduce_sum_async(void* buf, size_t count, DType t) override;
  void broadcast(void* buf, size_t bytes, int root) override;
  void barrier() override;
  void progress() override;
  MPI_Comm comm() const { return comm_; }

 private:
  friend class MpiPendingReduce;
  MPI_Comm comm_ = MPI_COMM_NULL;
  size_t max_piece_;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> in_flight_;  // requests progress() pokes
};

// The MPI datatype and sum operation for t.
MPI_Datatype mpi_type(DType t);
MPI_Op mpi_sum_op(DType t);

}  // namespace cnnscale
