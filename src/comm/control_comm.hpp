// control_comm.hpp — the control plane: the small host-side collectives with which
// ranks agree (a stop flag, a loss sum, a checkpoint's outcome, the resume point and
// the state read from it, timings for the summary), over MPI on a private duplicate of
// the world, whatever carries the gradients (the data plane, communicator.hpp: MPI or
// NCCL).
//
// Every collective names what it waits for and runs inside the watchdog's scope
// (watchdog.hpp): a rank that never arrives is reported and the job stopped instead of
// hanging. The watchdog runs from start_watchdog() until the ControlComm is destroyed;
// before that, and where it cannot run (MPI below MPI_THREAD_MULTIPLE, one rank), the
// collectives are plain MPI calls. waiting(what) puts a wait on another channel (the
// gradient allreduce on the data plane) into the same scope.
#pragma once
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/watchdog.hpp"
#include "util/error.hpp"

namespace cnnscale {

enum class ReduceOp { sum, min, max };

// The control plane over another transport than MPI: the gloo backend's
// (comm/gloo_communicator.hpp). Element kinds: 'i' int, 'l' int64_t, 'u' uint64_t,
// 'f' float, 'd' double. Each call is collective and throws UserError, naming `what`,
// when a rank does not arrive within the transport's timeout.
class ControlTransport {
 public:
  virtual ~ControlTransport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void allreduce(void* values, size_t n, char elem, ReduceOp op, const char* what) = 0;
  virtual void allgather(const void* mine, void* all, size_t bytes_each, const char* what) = 0;
  virtual void broadcast(void* data, size_t bytes, int root, const char* what) = 0;
  virtual void gather(const void* mine, void* all, size_t bytes_each, int root, const char* what) = 0;
  // The deadline of every later collective (--collective-timeout).
  virtual void set_timeout(double seconds) = 0;
};

class ControlComm {
 public:
  explicit ControlComm(MPI_Comm world);  // collective: duplicates world
  // Over another transport (gloo): no MPI communication; the transport's own deadline
  // covers the control collectives (start_watchdog sets it to the timeout) and, for a
  // device data plane, a local watchdog (Watchdog::start_local) the waits in waiting().
  explicit ControlComm(std::unique_ptr<ControlTransport> transport);
  ~ControlComm();                        // stops the watchdog (collective)
  ControlComm(const ControlComm&) = delete;
  ControlComm& operator=(const ControlComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Starts the watchdog (collective). False, and no watchdog, below
  // MPI_THREAD_MULTIPLE or with one rank. Once running it keeps its first timeout
  // (later calls, e.g. from a second Trainer on the same world, return true).
  // Over a transport: sets its deadline, and where the data plane's waits are on a
  // device (device_waits: NCCL, which the transport's deadline does not cover) and
  // there are peers, starts Watchdog::start_local for them.
  bool start_watchdog(double timeout_s, const std::string& host, bool device_waits = false);
  // The step the training loop is at, for the watchdog's report.
  void set_step(int64_t step) { watchdog_.set_step(step); }
  // Marks this thread as waiting in `what` (a static string) for as long as the
  // returned scope lives.
  Watchdog::Scope waiting(const char* what) { return Watchdog::Scope(watchdog_, what); }
  // Any thread: what the training thread waits in ("" when none is known), and on rank 0
  // the ranks whose watchdog did not answer a poke within wait_s (Watchdog::unanswered;
  // false where there are no heartbeats).
  std::string waiting_in() const { return watchdog_.waiting_in(); }
  bool unanswered(double wait_s, std::vector<std::string>* silent) { return watchdog_.unanswered(wait_s, silent); }

  // In place, element-wise over ranks. T: int, int64_t, uint64_t, float, double.
  template <class T>
  void allreduce(T* values, size_t n, ReduceOp op, const char* what) {
    allreduce_raw(values, n, datatype<T>(), op, what);
  }
  template <class T>
  T allreduce(T value, ReduceOp op, const char* what) {
    allreduce(&value, 1, op, what);
    return value;
  }
  // A struct whose members are all of type Field (named timings, sums, flags), field by
  // field: allreduce_fields(sums, ...) for doubles, allreduce_fields<int>(flags, ...).
  template <class Field = double, class Struct>
  void allreduce_fields(Struct& s, ReduceOp op, const char* what) {
    static_assert(std::is_trivially_copyable_v<Struct> && sizeof(Struct) % sizeof(Field) == 0 &&
                      alignof(Struct) == alignof(Field),
                  "allreduce_fields takes a struct whose members are all Field");
    allreduce_raw(&s, sizeof(Struct) / sizeof(Field), datatype<Field>(), op, what);
  }

  // In place: the sum over ranks of n doubles, added in rank order (((v0 + v1) + v2) ...)
  // after an MPI_Allgather, so every rank gets bitwise the same result whatever
  // algorithm the MPI library picks, and the result does not depend on it. For small
  // vectors (--sync-bn's per-layer statistics, as torch's SyncBatchNorm gathers them):
  // each rank receives size() × n doubles.
  void sum_in_rank_order(double* values, size_t n, const char* what);

  // root's bytes everywhere (any size).
  void broadcast(void* data, size_t bytes, int root, const char* what);
  // root's value of a trivially copyable T (a struct of positions, flags) everywhere.
  template <class T>
  void broadcast_value(T& value, int root, const char* what) {
    static_assert(std::is_trivially_copyable_v<T>, "broadcast_value takes a trivially copyable type");
    broadcast(&value, sizeof(T), root, what);
  }
  // root's string everywhere (a message, a path); returns it.
  std::string broadcast_string(const std::string& s, int root, const char* what);
  // A check only rank 0 can make (a path it will write): `check` runs there, and a
  // UserError it throws ends every rank alike (fail_collective: rank 0 says it once).
  template <class Check>
  void rank0_check(Check&& check, const char* what) {
    std::string error;
    if (rank_ == 0) {
      try {
        check();
      } catch (const UserError& e) {
        error = e.what();
      }
    }
    error = broadcast_string(error, 0, what);
    if (!error.empty()) fail_collective(rank_, error);
  }

  // Every rank's value at root, in rank order (empty elsewhere). T as for allreduce.
  template <class T>
  std::vector<T> gather(T value, int root, const char* what) {
    std::vector<T> all(rank_ == root ? static_cast<size_t>(size_) : 0);
    gather_raw(&value, all.data(), datatype<T>(), root, what);
    return all;
  }
  // Every rank's string at root, in rank order (empty elsewhere): --timeline's per-rank
  // parts. The total must stay below 2 GiB (MPI's int displacements).
  std::vector<std::string> gather_strings(const std::string& s, int root, const char* what);

 private:
  template <class T>
  static MPI_Datatype datatype() {
    if constexpr (std::is_same_v<T, int>) return MPI_INT;
    else if constexpr (std::is_same_v<T, int64_t>) return MPI_INT64_T;
    else if constexpr (std::is_same_v<T, uint64_t>) return MPI_UINT64_T;
    else if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
    else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
    else static_assert(sizeof(T) == 0, "no MPI datatype for this type");
  }
  void allreduce_raw(void* values, size_t n, MPI_Datatype type, ReduceOp op, const char* what);
  void gather_raw(const void* value, void* all, MPI_Datatype type, int root, const char* what);

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::unique_ptr<ControlTransport> transport_;  // set: every collective goes over it
  int rank_ = 0, size_ = 1;
  std::vector<double> gathered_;  // sum_in_rank_order's receive buffer, reused
  Watchdog watchdog_;
  bool watching_ = false;
};

}  // namespace cnnscale
