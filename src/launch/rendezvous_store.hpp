// rendezvous_store.hpp — a small TCP key-value store at MASTER_ADDR:MASTER_PORT, as
// PyTorch's c10d TCPStore: rank 0 serves it (listening on every interface, so a
// MASTER_ADDR naming any of its addresses works), every rank (rank 0 too) is a client.
// Ranks started by torchrun-style launchers or from TF_CONFIG share no MPI job; they
// meet here, exchange their hosts and their Gloo transport addresses (comm/gloo_*), and
// (on GPUs) could pass an ncclUniqueId the same way.
//
// Never a hang: every operation has a deadline (--collective-timeout). A store that
// cannot be reached, a port in use, a rank that never arrives and a rank that arrives
// twice each end with a UserError naming the cause and the fix.
//
// Wire format (all integers little-endian u32): hello "CNSTORE1" both ways, then
// requests  op(1 byte) keylen key [vallen value]  with op s(et), c(reate: set if absent),
// g(et); replies  status(1 byte: 1 found/created, 0 not) [vallen value] for g.
// Waiting is the client polling g every 10 ms (the store sees a few ranks, once).
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cnnscale {

class RendezvousStore {
 public:
  // rank 0 (is_server) binds port on every interface first; then every rank connects
  // to addr:port, retrying until timeout_s has passed. `what` names where addr/port
  // came from for messages ("MASTER_ADDR/MASTER_PORT", "TF_CONFIG's first worker").
  RendezvousStore(const std::string& addr, int port, bool is_server, double timeout_s, std::string what);
  ~RendezvousStore();
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  void set(const std::string& key, const std::string& value);
  bool create(const std::string& key, const std::string& value);  // false: the key existed
  bool try_get(const std::string& key, std::string* value);
  // Waits for every key until the deadline; returns the keys still missing (empty: all there).
  std::vector<std::string> wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  std::string get(const std::string& key, std::chrono::milliseconds timeout);  // UserError on timeout

  double timeout_s() const { return timeout_s_; }
  const std::string& where() const { return where_; }  // "addr:port (what)"
  // The local address this host uses to reach the store (the interface Gloo should bind).
  const std::string& local_address() const { return local_address_; }

 private:
  void serve();
  // A stop signal (SIGTERM, SIGUSR1) while waiting: a UserError naming it (issue 26 item 3).
  void stop_if_signalled() const;
  std::string request(char op, const std::string& key, const std::string* value, bool* status);

  std::string where_;
  double timeout_s_;
  int listen_fd_ = -1, wake_[2] = {-1, -1};
  std::thread server_;
  std::mutex mu_;  // one request at a time on fd_
  int fd_ = -1;
  std::string local_address_;
};

}  // namespace cnnscale
