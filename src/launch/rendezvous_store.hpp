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
// What our store bounds (issue 26 items 4, 5, issue 39 items 1, 2; docs/launch.md "What
// the rendezvous store trusts and bounds"): everything a client can make it hold is
// capped by what a world of W ranks needs there (StoreLimits, measured): key and value
// sizes, the number of keys and their bytes (193 MiB at 4096 ranks, ~70 MiB of it used;
// once ~17 GB, and a stranger stored 2.38 GB), the bytes in flight per connection and
// the number of connections. A connection in its handshake has a pool of its own (64)
// and 2 s to finish; while that pool is full, new connections wait in the kernel's
// queue in order, so strangers that never finish a handshake cannot take a rank's
// place. A client that stops reading its replies for 10 s is dropped. An allocation
// that fails refuses that write (status 3) instead of ending rank 0 (once: an uncaught
// std::bad_alloc under `ulimit -v`). It serves every client from one thread with
// non-blocking sockets, so one slow or silent client never delays another. With a
// token (launch/rendezvous_token.hpp) it serves only clients that prove they hold it.
// Rank 0 warns about each kind of refusal at once (then at most every 10 s) and its
// final errors say what was refused and from where (refusals()).
//
// Own wire format (integers little-endian u32): client "CNSTORE3" + flags(0: no token,
// 1: a token, 2: none yet, waiting for the token file) + nonce(32) [+ with a token
// HMAC("hello"|client nonce|0)]; server "CNSTORE3" + mode(0: open, 1: token proven at
// the hello, 2: refused (no token, another one; then closes), 3: busy, the world's
// connections are taken; then closes) + nonce(32). After mode 1 the client sends
// HMAC("client"|server nonce|client nonce), the server answers 1 + HMAC("server"|client
// nonce|server nonce), or 0 and closes. Then requests  op(1) keylen key [vallen value]
// with op s(et), c(reate: set if absent), g(et); replies status(1: found/created, 0:
// not, 2: refused, the store is full, 3: refused, rank 0 is out of memory) [vallen
// value] for a found g.
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

// The largest world that meets at a rendezvous store. Gloo's full mesh connects every
// rank to every other, per context (two contexts), and every rank reads every rank's
// address list from the store (W² reads of ~2·W bytes: comm/gloo_communicator.cpp
// compacts them; the store holds ~4·W² bytes of them, 64 MiB at 4096 ranks). Larger
// jobs use srun or mpirun (MPI's own wire-up).
constexpr int kMaxRendezvousRanks = 4096;
// The key each rank creates when it joins (+ its rank; value "host\nworld size"), and the key
// the store sets when a rank's join key is created a second time (+ the rank; value
// "host\naddress" of the second claim).
constexpr const char* kJoinPrefix = "cnnscale/join/";
constexpr const char* kClaimedTwicePrefix = "cnnscale/claimed-twice/";

enum class StoreProtocol { cnnscale, torch };

struct StoreLimits {
  size_t max_key = 0, max_value = 0, max_keys = 0, max_bytes = 0;
  size_t max_connections = 0;  // connections that finished the handshake (with a token: proved it)
  size_t max_pending = 0;      // connections in their handshake; more wait in the kernel's queue
  size_t max_in_flight = 0;    // bytes of requests being received and replies being sent, all connections
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

  // What the store holds (the serving rank; zeros elsewhere).
  struct Held {
    size_t keys = 0, bytes = 0;
  };
  Held held() const;
  // What the store refused or dropped since it started, for rank 0's final messages (the
  // serving rank; "" elsewhere, or when nothing was): "meanwhile rank 0's rendezvous store
  // refused 2 client(s) that presented another rendezvous token (the last from 10.0.0.7):
  // set CNNSCALE_RENDEZVOUS_TOKEN to the same value on every rank; …".
  std::string refusals() const;
  // The serving rank: the address of the client that created `key` (a key under
  // kJoinPrefix; "" for others, on other ranks, or when none did).
  std::string claim_address(const std::string& key) const;

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
  bool authenticated_ = false;  // this client proved the job's token to the store
  std::string local_address_;
};

}  // namespace cnnscale
