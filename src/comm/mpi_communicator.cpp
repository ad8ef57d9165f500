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

// Calls f(offset, count) for consecutive pieces of at most `piece` elements: MPI counts
// are int, so a buffer of more than INT_MAX elements (or bytes, for broadcasts) travels
// in several calls. Every rank splits alike, so the calls match.
template <typename F>
void for_each_piece(size_t count, size_t piece, F&& f) {
  for (size_t off = 0; off < count; off += piece) f(off, static_cast<int>(std::min(piece, count - off)));
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
  MpiPendingReduce(MpiCommunicator* owner, std::vector<MPI_Request> reqs) : owner_(owner), reqs_(std::move(reqs)) {}
  ~MpiPendingReduce() override { wait(); }
  void wait() override {
    if (reqs_.empty()) return;
    auto& v = owner_->in_flight_;
    for (MPI_Request r : reqs_) v.erase(std::remove(v.begin(), v.end(), r), v.end());
    mpiCheck(MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE));
    reqs_.clear();
  }

 private:
  MpiCommunicator* owner_;
  std::vector<MPI_Request> reqs_;
};

MpiCommunicator::MpiCommunicator(MPI_Comm parent, size_t max_piece)
    : max_piece_(std::min<size_t>(std::max<size_t>(max_piece, 1), INT_MAX)) {
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
  char* p = static_cast<char*>(buf);
  for_each_piece(count, max_piece_, [&](size_t off, int n) {
    mpiCheck(MPI_Allreduce(MPI_IN_PLACE, p + off * dtype_size(t), n, mpi_type(t), mpi_sum_op(t), comm_));
  });
}

std::unique_ptr<PendingReduce> MpiCommunicator::allreduce_sum_async(void* buf, size_t count, DType t) {
  char* p = static_cast<char*>(buf);
  std::vector<MPI_Request> reqs;
  for_each_piece(count, max_piece_, [&](size_t off, int n) {
    MPI_Request req = MPI_REQUEST_NULL;
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, p + off * dtype_size(t), n, mpi_type(t), mpi_sum_op(t), comm_, &req));
    reqs.push_back(req);
    in_flight_.push_back(req);
  });
  return std::make_unique<MpiPendingReduce>(this, std::move(reqs));
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
  char* p = static_cast<char*>(buf);
  for_each_piece(bytes, max_piece_, [&](size_t off, int n) { mpiCheck(MPI_Bcast(p + off, n, MPI_BYTE, root, comm_)); });
}

void MpiCommunicator::barrier() { mpiCheck(MPI_Barrier(comm_)); }

}  // namespace cnnscale
