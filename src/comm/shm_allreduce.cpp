// shm_allreduce.cpp — see shm_allreduce.hpp.
#include "comm/shm_allreduce.hpp"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>

#include "launch/mpi_check.hpp"

namespace cnnscale {
namespace {

constexpr size_t kLine = 64;
constexpr size_t kAlign = 16;  // slice boundaries on 64-byte lines (16 floats)

// Spins a little (the peer is usually microseconds away), then gives the core away:
// with more ranks than cores the rank we wait for may need this one.
template <class Pred>
void wait_until(Pred&& done, MPI_Comm progress_comm = MPI_COMM_NULL) {
  for (unsigned k = 0; !done(); ++k) {
    if (k < 256) {
      __builtin_ia32_pause();
    } else {
      if (progress_comm != MPI_COMM_NULL) {
        int flag = 0;
        MPI_Iprobe(MPI_ANY_SOURCE, 0x7ffd, progress_comm, &flag, MPI_STATUS_IGNORE);
      }
      sched_yield();
    }
  }
}

}  // namespace

std::unique_ptr<ShmAllreduce> ShmAllreduce::create(MPI_Comm world, size_t count,
                                                   std::vector<std::pair<size_t, size_t>> segments,
                                                   std::string* why, MPI_Comm node) {
  int wsize = 1, wrank = 0;
  mpiCheck(MPI_Comm_size(world, &wsize));
  mpiCheck(MPI_Comm_rank(world, &wrank));
  auto say = [&](const std::string& s) {
    if (why) *why = s;
    return nullptr;
  };
  if (wsize < 2) return say("one rank");
  if (count == 0 || segments.empty()) return say("nothing to sum");
  for (size_t i = 0; i < segments.size(); ++i) {
    const size_t expect = i == 0 ? 0 : segments[i - 1].second;
    if (segments[i].first != expect || segments[i].second < segments[i].first)
      return say("segments are not consecutive");
  }
  if (segments.back().second != count) return say("segments do not cover the buffer");

  auto r = std::unique_ptr<ShmAllreduce>(new ShmAllreduce());
  if (node != MPI_COMM_NULL)
    mpiCheck(MPI_Comm_dup(node, &r->node_));
  else
    mpiCheck(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, wrank, MPI_INFO_NULL, &r->node_));
  mpiCheck(MPI_Comm_rank(r->node_, &r->local_rank_));
  mpiCheck(MPI_Comm_size(r->node_, &r->local_size_));
  int sizes[2] = {r->local_size_, -r->local_size_}, ext[2];
  mpiCheck(MPI_Allreduce(sizes, ext, 2, MPI_INT, MPI_MAX, world));
  const bool uniform = ext[0] == -ext[1];
  mpiCheck(MPI_Comm_split(world, r->local_rank_, wrank, &r->cross_));
  mpiCheck(MPI_Comm_size(r->cross_, &r->nodes_));
  if (!uniform) return say("nodes run different numbers of ranks");  // destructor frees the communicators
  if (r->local_size_ < 2) return say("one rank per node");

  r->segs_ = std::move(segments);
  const size_t ctrl_bytes = ((1 + 2 * r->segs_.size()) * kLine + 4095) / 4096 * 4096;
  // + one line: MPI need not return line-aligned memory (Open MPI's is 8 bytes past a page).
  const size_t bytes = ctrl_bytes + (count * sizeof(float) + 4095) / 4096 * 4096 + kLine;
  MPI_Info info;
  mpiCheck(MPI_Info_create(&info));
  mpiCheck(MPI_Info_set(info, "alloc_shared_noncontig", "true"));  // each rank's part page-aligned, first-touched by it
  void* base = nullptr;
  mpiCheck(MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), 1, info, r->node_, &base, &r->win_));
  MPI_Info_free(&info);
  // Own part: counters constructed, buffer zeroed (touching it here also places its pages near this core).
  // The same offset within a page in every process, so every rank finds the same start.
  auto line_up = [](void* p) {
    return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + kLine - 1) / kLine * kLine);
  };
  char* own = line_up(base);
  for (size_t i = 0; i < ctrl_bytes / kLine; ++i) new (own + i * kLine) std::atomic<uint64_t>(0);
  std::memset(own + ctrl_bytes, 0, count * sizeof(float));
  mpiCheck(MPI_Win_lock_all(MPI_MODE_NOCHECK, r->win_));
  for (int k = 0; k < r->local_size_; ++k) {
    MPI_Aint sz = 0;
    int disp = 1;
    void* p = nullptr;
    mpiCheck(MPI_Win_shared_query(r->win_, k, &sz, &disp, &p));
    r->ctrl_.push_back(line_up(p));
    r->bufs_.push_back(reinterpret_cast<float*>(line_up(p) + ctrl_bytes));
  }
  r->mine_ = r->bufs_[static_cast<size_t>(r->local_rank_)];
  r->cross_req_.assign(r->segs_.size(), MPI_REQUEST_NULL);
  mpiCheck(MPI_Win_sync(r->win_));
  mpiCheck(MPI_Barrier(r->node_));  // every control block initialised before anyone reads it
  return r;
}

ShmAllreduce::~ShmAllreduce() {
  // Unwinding from an error on this rank alone: the frees below are collective and would
  // wait for ranks that are still training; leave them (the process is ending and the
  // error reaches main(), which aborts the job).
  if (std::uncaught_exceptions() > 0) return;
  for (auto& q : cross_req_)
    if (q != MPI_REQUEST_NULL) MPI_Wait(&q, MPI_STATUS_IGNORE);
  if (win_ != MPI_WIN_NULL) {
    MPI_Win_unlock_all(win_);
    MPI_Win_free(&win_);
  }
  if (cross_ != MPI_COMM_NULL) MPI_Comm_free(&cross_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

std::pair<size_t, size_t> ShmAllreduce::slice(size_t seg, int k) const {
  const auto [b, e] = segs_[seg];
  const size_t n = e - b, L = static_cast<size_t>(local_size_);
  auto bound = [&](size_t j) {  // inner bounds on whole 64-byte lines of the buffer
    if (j == 0) return b;
    const size_t x = (b + n * j / L + kAlign - 1) / kAlign * kAlign;
    return std::min(e, x);
  };
  return {bound(static_cast<size_t>(k)), bound(static_cast<size_t>(k) + 1)};
}

bool ShmAllreduce::try_reduce(size_t seg) {
  for (int k = 0; k < local_size_; ++k)
    if (ready_flag(k, seg).load(std::memory_order_acquire) != round_) return false;
  const auto [b, e] = slice(seg, local_rank_);
  float* out = mine_;
  const float* in[64];
  const int L = std::min(local_size_, 64);
  for (int k = 0; k < L; ++k) in[k] = bufs_[static_cast<size_t>(k)];
  if (local_size_ == 2) {  // the common case, as one loop the compiler vectorises (same sum as below)
    const float* a = in[0];
    const float* c = in[1];
    for (size_t i = b; i < e; ++i) out[i] = a[i] + c[i];
  } else {
    for (size_t i = b; i < e; ++i) {
      float s = in[0][i];
      for (int k = 1; k < L; ++k) s += in[k][i];
      out[i] = s;
    }
    for (int k = 64; k < local_size_; ++k) {  // very wide nodes: keep the same order
      const float* p = bufs_[static_cast<size_t>(k)];
      for (size_t i = b; i < e; ++i) out[i] += p[i];
    }
  }
  if (nodes_ > 1 && e > b) {
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, out + b, static_cast<int>(e - b), MPI_FLOAT, MPI_SUM, cross_,
                            &cross_req_[seg]));
  } else {
    reduced_flag(local_rank_, seg).store(round_, std::memory_order_release);
  }
  return true;
}

void ShmAllreduce::complete_cross() {
  for (size_t s = 0; s < next_reduce_; ++s) {
    if (cross_req_[s] == MPI_REQUEST_NULL) continue;
    int flag = 0;
    mpiCheck(MPI_Test(&cross_req_[s], &flag, MPI_STATUS_IGNORE));
    if (flag) reduced_flag(local_rank_, s).store(round_, std::memory_order_release);
  }
}

void ShmAllreduce::ready(size_t i) {
  ready_flag(local_rank_, i).store(round_, std::memory_order_release);
  progress();
}

void ShmAllreduce::progress() {
  while (next_reduce_ < segs_.size() && try_reduce(next_reduce_)) ++next_reduce_;
  if (nodes_ > 1) complete_cross();
}

void ShmAllreduce::finish() {
  const MPI_Comm pc = nodes_ > 1 ? cross_ : MPI_COMM_NULL;
  wait_until([&] {
    progress();
    return next_reduce_ == segs_.size();
  }, pc);
  for (size_t s = 0; s < segs_.size(); ++s) {
    if (cross_req_[s] != MPI_REQUEST_NULL) {
      mpiCheck(MPI_Wait(&cross_req_[s], MPI_STATUS_IGNORE));
      reduced_flag(local_rank_, s).store(round_, std::memory_order_release);
    }
  }
  // All-gather: every other slice from its owner, starting with the next rank so that
  // the ranks of a node do not all read the same one at once.
  for (size_t s = 0; s < segs_.size(); ++s) {
    for (int d = 1; d < local_size_; ++d) {
      const int k = (local_rank_ + d) % local_size_;
      wait_until([&] { return reduced_flag(k, s).load(std::memory_order_acquire) == round_; });
      const auto [b, e] = slice(s, k);
      if (e > b) std::memcpy(mine_ + b, bufs_[static_cast<size_t>(k)] + b, (e - b) * sizeof(float));
    }
  }
  done(local_rank_).store(round_, std::memory_order_release);
  for (int k = 0; k < local_size_; ++k)
    wait_until([&] { return done(k).load(std::memory_order_acquire) >= round_; });
  ++round_;
  next_reduce_ = 0;
}

}  // namespace cnnscale
