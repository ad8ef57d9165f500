// rendezvous_store.hpp — the small key-value store where ranks that share no MPI job
// (torchrun, TF_CONFIG, hand-set RANK/WORLD_SIZE) meet, exchange their hosts and their
// Gloo transport addresses (comm/gloo_*), and (on GPUs) an ncclUniqueId.
//
// Two stores, one client interface:
//  * cnnscale's own (StoreProtocol::cnnscale): rank 0 serves it at MASTER_ADDR:MASTER_PORT
//    (listening on every interface, so a MASTER_ADDR naming any of its addresses works);
//    every rank, rank 0 too, is a client. Used for TF_CONFIG, hand-started ranks, and
//    torchrun without an agent store.
//  * torchrun's agent store (StoreProtocol::torch): torchrun ≥ 2.0 serves a c10d TCPStore
//    at MASTER_ADDR:MASTER_PORT itself and says so with TORCHELASTIC_USE_AGENT_STORE=True;
//    every rank is a client speaking TCPStore's wire protocol (VALIDATE+PING, SET, GET,
//    ADD, CHECK; as torch 2.x's TCPStore client sends them). The keys carry a prefix
//    with TORCHELASTIC_RUN_ID and TORCHELASTIC_RESTART_COUNT, so a restarted worker
//    group never reads the keys of the group before it (the agent's store outlives it).
//
// Never a hang: every operation has a deadline (--collective-timeout); a stop signal
// ends any wait within a second. A store that cannot be reached, a port in use, a rank
// that never arrives, a rank that arrives twice each end with a UserError naming the cause.
//
// What our store bounds (issue 26 items 4, 5; docs/launch.md "What the rendezvous store
// trusts and bounds"): everything a client can make it hold is capped by the world
// size W (StoreLimits): key and value sizes, the number of keys and their bytes, the
// bytes in flight per connection and the number of connections; a handshake not done in
// 10 s and a client that stops reading its replies for 10 s are dropped. It serves
// every client from one thread with non-blocking sockets, so one slow or silent client
// never delays another. With a token (launch/rendezvous_token.hpp) it serves only
// clients that prove they hold it.
//
// Own wire format (integers little-endian u32): client "CNSTORE2" + flags(1: has token)
// + nonce(32); server "CNSTORE2" + mode(0: open, 1: token) + nonce(32); with a token the
// client sends HMAC("client"|server nonce|client nonce), the server answers 1 + HMAC(
// "server"|client nonce|server nonce) or 0 and closes. Then requests  op(1) keylen key
// [vallen value]  with op s(et), c(reate: set if absent), g(et); replies status(1: 1
// found/created, 0 not, 2 refused: the store is full) [vallen value] for a found g.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cnnscale {

// The largest world that meets at a rendezvous store: Gloo's full mesh stores W
// addresses of 192 bytes per rank and context (two contexts), so the store of a world
// of W holds ~400·W² bytes (400 MiB at 1024 ranks, 6.4 GiB at 4096). Larger jobs use
// srun or mpirun (MPI's own wire-up).
constexpr int kMaxRendezvousRanks = 4096;

enum class StoreProtocol { cnnscale, torch };

struct StoreLimits {
  size_t max_key = 0, max_value = 0, max_keys = 0, max_bytes = 0, max_connections = 0;
};
// What our store allows a world of `world_size` ranks (see above).
StoreLimits store_limits_for_world(int world_size);

struct StoreOptions {
  std::string addr;
  int port = 0;                 // 0 with serve: any free port (a one-process world)
  bool serve = false;           // rank 0 of our own store
  double timeout_s = 300;
  std::string what;             // where addr/port came from, for messages
  StoreProtocol protocol = StoreProtocol::cnnscale;
  std::string key_prefix;       // prepended to every key (torchrun: run id and restart count)
  int world_size = 1;           // the server's bounds
  std::string token;            // the job's token ("" none; from CNNSCALE_RENDEZVOUS_TOKEN or the server's file)
  std::string token_file;       // clients: read the token here when the server asks for one;
                                // the server: remove it when the store closes
};

class RendezvousStore {
 public:
  // A server binds first (on every interface); then this process connects to
  // addr:port as a client, retrying until timeout_s has passed.
  explicit RendezvousStore(StoreOptions opts);
  // Our own store, no token, the bounds of a world of 2 ranks (tests, tools).
  RendezvousStore(const std::string& addr, int port, bool serve, double timeout_s, std::string what)
      : RendezvousStore(StoreOptions{addr, port, serve, timeout_s, std::move(what), StoreProtocol::cnnscale, "", 2, "", ""}) {}
  ~RendezvousStore();
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  void set(const std::string& key, const std::string& value);
  bool create(const std::string& key, const std::string& value);  // false: the key existed
  bool try_get(const std::string& key, std::string* value);
  // Waits for every key until the deadline; returns the keys still missing (empty: all there).
  std::vector<std::string> wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  std::string get(const std::string& key, std::chrono::milliseconds timeout);  // UserError on timeout

  double timeout_s() const { return opts_.timeout_s; }
  const std::string& where() const { return where_; }  // "addr:port (what)"
  StoreProtocol protocol() const { return opts_.protocol; }
  // The local address this host uses to reach the store (the interface Gloo should bind).
  const std::string& local_address() const { return local_address_; }

 private:
  class Server;
  int connect_client(double deadline_s);
  // A stop signal (SIGTERM, SIGUSR1) while waiting: a UserError naming it (issue 26 item 3).
  void stop_if_signalled() const;
  std::string request(char op, const std::string& key, const std::string* value, bool* status);
  void torch_send(const std::string& msg);
  std::string torch_recv(size_t n);
  bool torch_check(const std::vector<std::string>& keys);
  [[noreturn]] void lost(const char* what) const;
  std::string who_serves() const;

  StoreOptions opts_;
  std::string where_;
  std::unique_ptr<Server> server_;
  std::mutex mu_;  // one request at a time on fd_
  int fd_ = -1;
  std::string local_address_;
};

}  // namespace cnnscale
