// fuzz_rendezvous — libFuzzer target: cnnscale's own rendezvous store
// (launch/rendezvous_store.hpp) as a hostile peer meets it, over real loopback TCP through
// the store's own framing code (src/launch/rendezvous_store.cpp and rendezvous_token.cpp
// compiled in):
//  * the server (rank 0's side): two stores run for the whole process, one open and one
//    with a token, each world_size 2 (what `RendezvousStore(serve=true)` starts: its serving
//    thread and its own client). Each input is sent on a fresh raw connection in 1..8 pieces,
//    then the write side is shut (EOF); the harness reads what comes back until the store
//    closes the connection. Targets: the open store; the token store, raw (hello, wrong
//    proofs); the token store after a real handshake that the harness performs with the
//    product's HMAC (rendezvous_mac), so that the requests reach a trusted connection.
//  * the client (every rank's side): a real client (serve=false; no token, or the job's
//    token) meets a fake store that does its half of the handshake right, then answers the
//    client's get, create and set with the input (statuses, lengths, values).
// Input: byte 0 chooses: bits 0-1 the side (0 open store, 1 token store raw, 2 token
// store after the handshake, 3 the client), bits 2-4 the pieces - 1, bit 5 the client's
// token; then one byte per cut between pieces (its place: byte × length / 256); the rest
// is what is sent.
// Not fuzzed: the client's reading of the store's hello answer (41 fixed bytes, + 33 after
// a proof). connect_client retries an answer it rejects after a fixed 0.1 s pause, until
// its --collective-timeout, so each such input would cost ≥ 0.1 s, ~30 times a server
// input (~3 ms here).
// What it asserts (a breach aborts, naming it):
//  * the store closes the connection soon after the client's EOF (within 5 s; at once in
//    practice): what a stranger sends can never hold a connection open past its own end;
//  * after every input, a legitimate client (the store's own, through its client API)
//    still reads a key: the serving thread is alive and serves it (bytes in flight that
//    closed connections left counted would, accumulated, get it dropped);
//  * what the store holds stays within StoreLimits (keys ≤ max_keys + the 64 "claimed
//    twice" marks it may add, bytes ≤ max_bytes);
//  * a holder of the job's token is accepted, and the store proves the token back;
//  * a real client's hello and proofs are those the wire format describes;
//  * the client ends with a UserError or succeeds, at once after the fake store's EOF
//    (within 5 s), whatever it replies.
// Crashes, hangs (libFuzzer's -timeout), leaks and ASan/UBSan reports are defects too.
// The stores persist across inputs (as rank 0's does across connections), so an input's
// keys stay; a store is started afresh when it holds max_keys keys or half its bytes. An
// input run alone (reproducing a finding) meets empty stores: a finding that needs keys
// earlier inputs stored needs them too (name them first on the command line: libFuzzer
// runs the files it is given in that order).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "launch/rendezvous_store.hpp"
#include "launch/rendezvous_token.hpp"
#include "util/error.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using cnnscale::RendezvousStore;

constexpr char kJobToken[] = "fuzz-rendezvous-token-0123456789";  // ≥ 16 bytes, as CNNSCALE_RENDEZVOUS_TOKEN
constexpr char kHealthKey[] = "fuzz/health";
constexpr int kWorld = 2;
constexpr double kCloseWithinS = 5;    // any exchange, and the close after an EOF (libFuzzer's -timeout: 10 s)
constexpr double kClientTimeoutS = 2;  // the fuzzed client's --collective-timeout
constexpr size_t kMaxInput = 1 << 20;

[[noreturn]] void defect(const std::string& what) {
  std::fprintf(stderr, "fuzz_rendezvous: DEFECT: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The port in where() ("addr:port (what)").
int port_of(const RendezvousStore& s) {
  const std::string& w = s.where();
  return std::atoi(w.c_str() + w.find(':') + 1);
}

void close_hard(int fd) {  // no TIME_WAIT left behind: thousands of connections a second
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  ::close(fd);
}

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) defect(std::string("socket: ") + std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  int err = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 ? 0 : errno;
  if (err == EINPROGRESS || err == EINTR) {  // (EINTR: libFuzzer's SIGALRM; the connect goes on)
    const auto t0 = Clock::now();
    for (pollfd p{fd, POLLOUT, 0}; ::poll(&p, 1, 50) != 1;)
      if (since(t0) > kCloseWithinS) defect("no connection to the store within 5 s");
    socklen_t len = sizeof(err);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  }
  if (err != 0) defect("cannot connect to the store on port " + std::to_string(port) + ": " + std::strerror(err));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// One side of a connection: sends pieces, reads whatever comes back, all non-blocking.
struct Peer {
  explicit Peer(int f) : fd(f) {}
  int fd;
  bool closed = false;  // the other side closed (EOF or reset)
  std::string got;

  // Reads what is there (waiting at most wait_s for the first byte); false once closed.
  bool drain(double wait_s) {
    pollfd p{fd, POLLIN, 0};
    const timespec ts{static_cast<time_t>(wait_s), static_cast<long>((wait_s - static_cast<long>(wait_s)) * 1e9)};
    if (::ppoll(&p, 1, &ts, nullptr) <= 0) return !closed;
    char buf[65536];
    for (;;) {
      const ssize_t k = ::recv(fd, buf, sizeof(buf), 0);
      if (k > 0) {
        if (got.size() < (1 << 20)) got.append(buf, static_cast<size_t>(k));
        continue;
      }
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (k < 0 && errno == EINTR) continue;
      closed = true;  // 0: EOF; ECONNRESET: closed with our bytes unread
      return false;
    }
  }
  // Sends all of [p, p+n) while reading replies; false when the other side closed.
  bool send(const char* p, size_t n, Clock::time_point t0, double limit_s, const char* what) {
    while (n > 0 && !closed) {
      const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
      if (k > 0) {
        p += k;
        n -= static_cast<size_t>(k);
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        closed = true;  // EPIPE, ECONNRESET: it dropped us
        break;
      }
      pollfd ps{fd, POLLOUT | POLLIN, 0};
      ::poll(&ps, 1, 10);
      if (ps.revents & POLLIN) drain(0);
      if (since(t0) > limit_s) defect(std::string(what) + " took no bytes for " + std::to_string(limit_s) + " s");
    }
    return !closed;
  }
  // Reads until n bytes are in got (false: closed first), or defect after limit_s.
  bool await(size_t n, Clock::time_point t0, double limit_s, const char* what) {
    while (got.size() < n) {
      if (!drain(0.01) && got.size() < n) return false;
      if (since(t0) > limit_s) defect(std::string(what) + " did not answer within " + std::to_string(limit_s) + " s");
    }
    return true;
  }
  // Sends the pieces, a short pause between them so that each arrives on its own; then EOF.
  void send_pieces(const std::vector<std::string>& pieces, Clock::time_point t0, const char* what) {
    for (size_t i = 0; i < pieces.size() && !closed; ++i) {
      send(pieces[i].data(), pieces[i].size(), t0, kCloseWithinS, what);
      if (i + 1 < pieces.size()) drain(0.0003);
    }
    ::shutdown(fd, SHUT_WR);
  }
};

// A store of ours, serving (its own client connected), with its health key written.
struct Served {
  std::unique_ptr<RendezvousStore> store;
  int port = 0;
  std::string token;
  explicit Served(std::string t) : token(std::move(t)) { start(); }
  void start() {
    store.reset();
    cnnscale::StoreOptions o;
    o.addr = "127.0.0.1";
    o.port = 0;
    o.serve = true;
    o.timeout_s = kCloseWithinS;
    o.what = "fuzz_rendezvous";
    o.world_size = kWorld;
    o.token = token;
    store = std::make_unique<RendezvousStore>(o);
    port = port_of(*store);
    store->set(kHealthKey, "ok");
  }
  // The store still serves a legitimate client and holds no more than its limits allow.
  void check_healthy() {
    std::string v;
    try {
      if (!store->try_get(kHealthKey, &v)) defect("the store lost the key " + std::string(kHealthKey));
    } catch (const std::exception& e) {
      defect(std::string("a legitimate client can no longer use the store: ") + e.what());
    }
    const cnnscale::StoreLimits lim = cnnscale::store_limits_for_world(kWorld);
    const RendezvousStore::Held h = store->held();
    // + the 64 "claimed twice" marks it may add beyond max_keys (not counted in its bytes)
    if (h.keys > lim.max_keys + 64 || h.bytes > lim.max_bytes)
      defect("the store holds " + std::to_string(h.keys) + " keys and " + std::to_string(h.bytes) +
             " bytes, beyond its limits (" + std::to_string(lim.max_keys) + " keys, " + std::to_string(lim.max_bytes) +
             " bytes)");
    if (h.keys >= lim.max_keys || h.bytes > lim.max_bytes / 2) start();  // full: a fresh one for the next inputs
  }
};

Served* g_open = nullptr;
Served* g_token = nullptr;
int g_fake_listener = -1, g_fake_port = 0;

void init() {
  std::signal(SIGPIPE, SIG_IGN);
  g_open = new Served("");  // never freed: the serving threads outlive every input
  g_token = new Served(kJobToken);
  g_fake_listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  if (g_fake_listener < 0 || ::bind(g_fake_listener, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      ::listen(g_fake_listener, 64) != 0 || ::getsockname(g_fake_listener, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    defect(std::string("cannot listen for the fake store: ") + std::strerror(errno));
  g_fake_port = ntohs(sa.sin_port);
}

std::string bytes(const cnnscale::Mac& m) { return std::string(reinterpret_cast<const char*>(m.data()), m.size()); }

// The client side of the token handshake, as a rank holding the job's token does it:
// hello with the token's MAC, the proof over the store's nonce, the store's proof checked.
void handshake(Peer& peer, Clock::time_point t0) {
  cnnscale::Nonce cn{};
  for (size_t i = 0; i < cn.size(); ++i) cn[i] = static_cast<unsigned char>(i);
  std::string hello = std::string("CNSTORE3") + '\1';
  hello.append(reinterpret_cast<const char*>(cn.data()), cn.size());
  hello += bytes(cnnscale::rendezvous_mac(kJobToken, "cnnscale-hello", cn, cnnscale::Nonce{}));
  if (!peer.send(hello.data(), hello.size(), t0, kCloseWithinS, "the token store") ||
      !peer.await(8 + 1 + 32, t0, kCloseWithinS, "the token store"))
    defect("the token store closed the connection of a client that holds the job's token");
  if (peer.got.compare(0, 8, "CNSTORE3") != 0 || peer.got[8] != 1)
    defect("the token store did not ask a holder of the job's token for its proof (mode " +
           std::to_string(static_cast<int>(peer.got[8])) + ")");
  cnnscale::Nonce sn{};
  std::memcpy(sn.data(), peer.got.data() + 9, sn.size());
  peer.got.clear();
  const std::string proof = bytes(cnnscale::rendezvous_mac(kJobToken, "cnnscale-client", sn, cn));
  if (!peer.send(proof.data(), proof.size(), t0, kCloseWithinS, "the token store") ||
      !peer.await(1 + 32, t0, kCloseWithinS, "the token store") || peer.got[0] != 1)
    defect("the token store refused the proof of a client that holds the job's token");
  cnnscale::Mac theirs{};
  std::memcpy(theirs.data(), peer.got.data() + 1, theirs.size());
  if (!cnnscale::same_mac(theirs, cnnscale::rendezvous_mac(kJobToken, "cnnscale-server", cn, sn)))
    defect("the token store did not prove the job's token back");
  peer.got.clear();
}

void fuzz_server(Served& served, bool authenticate, const std::vector<std::string>& pieces) {
  const auto t0 = Clock::now();
  Peer peer(connect_loopback(served.port));
  if (authenticate) handshake(peer, t0);
  peer.send_pieces(pieces, t0, "the store");
  const auto eof = Clock::now();
  while (!peer.closed) {
    peer.drain(0.05);
    if (since(eof) > kCloseWithinS)
      defect("the store kept the connection open " + std::to_string(kCloseWithinS) +
             " s after the client's EOF (it read " + std::to_string(peer.got.size()) + " bytes back)");
  }
  close_hard(peer.fd);
  served.check_healthy();
}

// A real client (serve=false) against a fake store: the store's half of the handshake
// done right (open; or with the job's token, both proofs checked), then the pieces are
// the replies to the client's get, create and set.
void fuzz_client(bool token, const std::vector<std::string>& pieces) {
  cnnscale::StoreOptions o;
  o.addr = "127.0.0.1";
  o.port = g_fake_port;
  o.timeout_s = kClientTimeoutS;
  o.what = "fuzz_rendezvous's fake store";
  o.world_size = kWorld;
  if (token) o.token = kJobToken;
  std::string escaped;
  const auto t0 = Clock::now();
  std::thread client([&] {
    try {
      RendezvousStore c(o);
      std::string v;
      c.try_get("cnnscale/join/0", &v);
      c.create("cnnscale/join/1", "host\n2");
      c.set("cnnscale/devices/1", "-1");
    } catch (const cnnscale::UserError&) {  // the expected end of a bad reply
    } catch (const std::exception& e) {
      escaped = e.what();
    } catch (...) {
      escaped = "a non-std exception";
    }
  });
  // The client's connection with its hello (one whose connect a signal interrupted, it
  // closes and makes again: the next).
  const size_t hello_size = 8 + 1 + 32 + (token ? 32 : 0);
  std::unique_ptr<Peer> conn;
  while (!conn) {
    for (pollfd p{g_fake_listener, POLLIN, 0}; ::poll(&p, 1, 50) != 1;)  // (EINTR: libFuzzer's SIGALRM)
      if (since(t0) > kCloseWithinS) defect("the client did not connect");
    const int fd = ::accept4(g_fake_listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    conn = std::make_unique<Peer>(fd);
    if (!conn->await(hello_size, t0, kCloseWithinS, "the client")) {
      close_hard(fd);
      conn.reset();
    }
  }
  Peer& peer = *conn;
  cnnscale::Nonce cn{}, sn{};
  std::memcpy(cn.data(), peer.got.data() + 9, cn.size());
  for (size_t i = 0; i < sn.size(); ++i) sn[i] = static_cast<unsigned char>(0xa0 + i);
  if (peer.got.compare(0, 8, "CNSTORE3") != 0 || peer.got[8] != (token ? 1 : 0) ||
      (token && peer.got.substr(41, 32) != bytes(cnnscale::rendezvous_mac(kJobToken, "cnnscale-hello", cn, {}))))
    defect("the client's hello is not the one the wire format describes");
  peer.got.erase(0, hello_size);
  std::string answer = std::string("CNSTORE3") + (token ? '\1' : '\0');
  answer.append(reinterpret_cast<const char*>(sn.data()), sn.size());
  peer.send(answer.data(), answer.size(), t0, kCloseWithinS, "the client");
  if (token) {
    if (!peer.await(32, t0, kCloseWithinS, "the client")) defect("the client closed before its proof");
    if (peer.got.substr(0, 32) != bytes(cnnscale::rendezvous_mac(kJobToken, "cnnscale-client", sn, cn)))
      defect("the client's proof of the job's token is wrong");
    peer.got.erase(0, 32);
    const std::string verdict = '\1' + bytes(cnnscale::rendezvous_mac(kJobToken, "cnnscale-server", cn, sn));
    peer.send(verdict.data(), verdict.size(), t0, kCloseWithinS, "the client");
  }
  peer.send_pieces(pieces, t0, "the client");
  while (!peer.closed && since(t0) < kCloseWithinS) peer.drain(0.05);
  close_hard(peer.fd);
  client.join();
  if (!escaped.empty()) defect("the client let an exception other than UserError escape: " + escaped);
  const double took = since(t0);
  if (took > kCloseWithinS)
    defect("the client took " + std::to_string(took) + " s over replies that ended with an EOF");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > kMaxInput) return -1;
  if (!g_open) init();
  const uint8_t control = data[0];
  const int side = control & 3;
  const size_t cuts = (control >> 2) & 7;
  if (size < 1 + cuts) return -1;
  const char* body = reinterpret_cast<const char*>(data + 1 + cuts);
  const size_t n = size - 1 - cuts;
  std::vector<size_t> at{0, n};
  for (size_t i = 0; i < cuts; ++i) at.push_back(data[1 + i] * n / 256);
  std::sort(at.begin(), at.end());
  std::vector<std::string> pieces;
  for (size_t i = 0; i + 1 < at.size(); ++i)
    if (at[i + 1] > at[i]) pieces.emplace_back(body + at[i], at[i + 1] - at[i]);
  switch (side) {
    case 0: fuzz_server(*g_open, false, pieces); break;
    case 1: fuzz_server(*g_token, false, pieces); break;
    case 2: fuzz_server(*g_token, true, pieces); break;
    default: fuzz_client((control >> 5) & 1, pieces); break;
  }
  return 0;
}
