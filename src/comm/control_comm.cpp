// control_comm.cpp — see control_comm.hpp.
#include "comm/control_comm.hpp"

#include <algorithm>
#include <climits>

#include "launch/mpi_check.hpp"

namespace cnnscale {
namespace {

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::min: return MPI_MIN;
    case ReduceOp::max: return MPI_MAX;
  }
  return MPI_OP_NULL;
}

int checked_count(size_t n) {
  if (n > static_cast<size_t>(INT_MAX)) abort_job("control collective of more than INT_MAX elements");
  return static_cast<int>(n);
}

char elem_kind(MPI_Datatype t) {
  if (t == MPI_INT) return 'i';
  if (t == MPI_INT64_T) return 'l';
  if (t == MPI_UINT64_T) return 'u';
  if (t == MPI_FLOAT) return 'f';
  if (t == MPI_DOUBLE) return 'd';
  abort_job("control collective of an unknown element type");
}

size_t elem_bytes(char k) { return k == 'i' || k == 'f' ? 4 : 8; }

}  // namespace

ControlComm::ControlComm(std::unique_ptr<ControlTransport> transport)
    : transport_(std::move(transport)), rank_(transport_->rank()), size_(transport_->size()) {}

ControlComm::ControlComm(MPI_Comm world) {
  mpiCheck(MPI_Comm_dup(world, &comm_));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);  // mpiCheck reports, with the call
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

ControlComm::~ControlComm() {
  watchdog_.stop();
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

bool ControlComm::start_watchdog(double timeout_s, const std::string& host, bool device_waits) {
  if (transport_) {
    transport_->set_timeout(timeout_s);  // the control plane's own collectives, and a Gloo data plane's
    // A device data plane's waits (NCCL's, inside waiting()) have no other deadline.
    if (!watching_ && device_waits && size_ > 1) watching_ = watchdog_.start_local(rank_, timeout_s, host);
    return true;
  }
  if (!watching_) watching_ = watchdog_.start(comm_, timeout_s, host);
  return watching_;
}

void ControlComm::allreduce_raw(void* values, size_t n, MPI_Datatype type, ReduceOp op, const char* what) {
  if (transport_) return transport_->allreduce(values, n, elem_kind(type), op, what);
  Watchdog::Scope waiting(watchdog_, what);
  mpiCheck(MPI_Allreduce(MPI_IN_PLACE, values, checked_count(n), type, mpi_op(op), comm_));
}

void ControlComm::sum_in_rank_order(double* values, size_t n, const char* what) {
  if (size_ == 1 || n == 0) return;
  const int count = checked_count(n);
  checked_count(n * static_cast<size_t>(size_));
  gathered_.resize(n * static_cast<size_t>(size_));
  if (transport_) {
    transport_->allgather(values, gathered_.data(), n * sizeof(double), what);
  } else {
    Watchdog::Scope waiting(watchdog_, what);
    mpiCheck(MPI_Allgather(values, count, MPI_DOUBLE, gathered_.data(), count, MPI_DOUBLE, comm_));
  }
  for (size_t i = 0; i < n; ++i) {
    double s = gathered_[i];
    for (int r = 1; r < size_; ++r) s += gathered_[static_cast<size_t>(r) * n + i];
    values[i] = s;
  }
}

void ControlComm::broadcast(void* data, size_t bytes, int root, const char* what) {
  if (transport_) return transport_->broadcast(data, bytes, root, what);
  Watchdog::Scope waiting(watchdog_, what);
  constexpr size_t kChunk = size_t{1} << 30;  // MPI counts are int
  auto* p = static_cast<char*>(data);
  for (size_t off = 0; off < bytes; off += kChunk)
    mpiCheck(MPI_Bcast(p + off, static_cast<int>(std::min(kChunk, bytes - off)), MPI_BYTE, root, comm_));
}

std::string ControlComm::broadcast_string(const std::string& s, int root, const char* what) {
  uint64_t n = rank_ == root ? s.size() : 0;
  broadcast_value(n, root, what);
  std::string out = rank_ == root ? s : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) broadcast(out.data(), out.size(), root, what);
  return out;
}

void ControlComm::gather_raw(const void* value, void* all, MPI_Datatype type, int root, const char* what) {
  if (transport_) return transport_->gather(value, all, elem_bytes(elem_kind(type)), root, what);
  Watchdog::Scope waiting(watchdog_, what);
  mpiCheck(MPI_Gather(value, 1, type, all, 1, type, root, comm_));
}

std::vector<std::string> ControlComm::gather_strings(const std::string& s, int root, const char* what) {
  const int n = checked_count(s.size());
  if (transport_) {  // it gathers equal sizes only: every string padded to the longest
    std::vector<int> sizes(static_cast<size_t>(size_));
    transport_->allgather(&n, sizes.data(), sizeof(int), what);
    const size_t longest = static_cast<size_t>(*std::max_element(sizes.begin(), sizes.end()));
    std::string padded = s;
    padded.resize(longest, '\0');
    std::string all(rank_ == root ? longest * sizes.size() : 0, '\0');
    if (longest > 0) transport_->gather(padded.data(), all.data(), longest, root, what);
    std::vector<std::string> out;
    if (rank_ == root)
      for (size_t r = 0; r < sizes.size(); ++r) out.push_back(all.substr(r * longest, static_cast<size_t>(sizes[r])));
    return out;
  }
  std::vector<int> sizes = gather(n, root, what);
  std::vector<int> displs(sizes.size(), 0);
  size_t total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    displs[r] = checked_count(total);
    total += static_cast<size_t>(sizes[r]);
  }
  checked_count(total);
  std::string all(total, '\0');
  {
    Watchdog::Scope waiting(watchdog_, what);
    mpiCheck(MPI_Gatherv(s.data(), n, MPI_CHAR, all.data(), sizes.data(), displs.data(), MPI_CHAR, root, comm_));
  }
  std::vector<std::string> out;
  for (size_t r = 0; r < sizes.size(); ++r)
    out.push_back(all.substr(static_cast<size_t>(displs[r]), static_cast<size_t>(sizes[r])));
  return out;
}

}  // namespace cnnscale
