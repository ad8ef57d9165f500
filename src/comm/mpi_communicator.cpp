// mpi_communicator.cpp — see mpi_communicator.hpp.
#include "comm/mpi_communicator.hpp"

#include <algorithm>
#include <climits>

#include "launch/mpi_check.hpp"
#include "util/bf16.hpp"

namespace cnnscale {
namespace {

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

MPI_Op g_bf16_sum = MPI_OP_NULL;

int checked_count(size_t count) {
  if (count > static_cast<size_t>(INT_MAX)) abort_job("MPI reduction of more than INT_MAX elements is not supported");
  return static_cast<int>(count);
}

}  // namespace

MPI_Datatype mpi_type(DType t) { return t == DType::f32 ? MPI_FLOAT : MPI_UINT16_T; }

MPI_Op mpi_sum_op(DType t) {
  if (t == DType::f32) return MPI_SUM;
  if (g_bf16_sum == MPI_OP_NULL) mpiCheck(MPI_Op_create(&bf16_sum, /*commute=*/1, &g_bf16_sum));
  return g_bf16_sum;
}

class MpiPendingReduce final : public PendingReduce {
 public:
  MpiPendingReduce(MpiCommunicator* owner, MPI_Request req) : owner_(owner), req_(req) {}
  ~MpiPendingReduce() override { wait(); }
  void wait() override {
    if (req_ == MPI_REQUEST_NULL) return;
    MPI_Request r = req_;
    auto& v = owner_->in_flight_;
    v.erase(std::remove(v.begin(), v.end(), r), v.end());
    mpiCheck(MPI_Wait(&req_, MPI_STATUS_IGNORE));
  }

 private:
  MpiCommunicator* owner_;
  MPI_Request req_;
};

MpiCommunicator::MpiCommunicator(MPI_Comm parent) {
  mpiCheck(MPI_Comm_dup(parent, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::allreduce_sum(void* buf, size_t count, DType t) {
  mpiCheck(MPI_Allreduce(MPI_IN_PLACE, buf, checked_count(count), mpi_type(t), mpi_sum_op(t), comm_));
}

std::unique_ptr<PendingReduce> MpiCommunicator::allreduce_sum_async(void* buf, size_t count, DType t) {
  MPI_Request req = MPI_REQUEST_NULL;
  mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, buf, checked_count(count), mpi_type(t), mpi_sum_op(t), comm_, &req));
  in_flight_.push_back(req);
  return std::make_unique<MpiPendingReduce>(this, req);
}

void MpiCommunicator::progress() {
  if (in_flight_.empty()) return;
  int flag = 0;
  // MPI_Testall on copies: completion is observed (and the request freed) only in wait().
  for (MPI_Request r : in_flight_) {
    MPI_Request copy = r;
    MPI_Request_get_status(copy, &flag, MPI_STATUS_IGNORE);
  }
}

void MpiCommunicator::broadcast(void* buf, size_t bytes, int root) {
  mpiCheck(MPI_Bcast(buf, checked_count(bytes), MPI_BYTE, root, comm_));
}

void MpiCommunicator::barrier() { mpiCheck(MPI_Barrier(comm_)); }

}  // namespace cnnscale
