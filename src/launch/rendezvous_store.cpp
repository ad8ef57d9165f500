// rendezvous_store.cpp — see rendezvous_store.hpp.
#include "launch/rendezvous_store.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>

#include "launch/rendezvous_token.hpp"
#include "util/error.hpp"
#include "util/utf8.hpp"
#include "util/log.hpp"
#include "util/memory.hpp"
#include "util/stop_signal.hpp"

namespace cnnscale {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kHello[] = "CNSTORE3";
constexpr size_t kHelloLen = 8;
// A connection must finish its handshake this soon after it is accepted (a rank's takes
// one round trip; issue 39 item 2: at 10 s, 100 strangers that never finished held the store).
constexpr double kHandshakeS = 2;
constexpr double kStalledS = 10;    // a client that reads none of its reply for this long is dropped
// While the handshake pool is full and more connections wait, one that has sent no byte
// for this long makes room (issue 48 item 4): a rank's hello is sent right after its
// connect, a stranger that holds connections open without a word is dropped. At the 2 s
// handshake deadline, 1,000 such strangers kept a rank out for 1000/64 × 2 s; now the
// queue drains at 64 per 0.25 s, and a rank behind 1,000 of them gets in within ~4 s.
constexpr double kSilentS = 0.25;
constexpr double kWarnEveryS = 10;  // each kind of refusal is warned about at once, then at most this often

// The hello's flags (what the client holds) and the server's answer (mode).
constexpr char kNoToken = 0, kToken = 1, kAwaitingTokenFile = 2;
constexpr char kOpen = 0, kProve = 1, kRefused = 2, kBusy = 3;
// A request's reply status.
constexpr char kNo = 0, kYes = 1, kFull = 2, kOutOfMemory = 3;
constexpr char kHelloLabel[] = "cnnscale-hello";  // the MAC a token holder sends with its hello

// torch.distributed TCPStore (torch 2.x): c10d::detail::QueryType and friends.
constexpr uint8_t kTorchValidate = 0, kTorchSet = 1, kTorchGet = 3, kTorchAdd = 4, kTorchCheck = 5, kTorchPing = 13;
constexpr uint32_t kTorchMagic = 0x3C85F7CE;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}
void put_torch_string(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

// Blocking send/recv of exactly n bytes under SO_SNDTIMEO/SO_RCVTIMEO; false on error or timeout.
bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}
// Receives exactly n bytes (false: the peer closed, an error, or the timeout).
// stop_aware_s >= 0 (the connect handshake, which must not outlast a stop signal): before
// each piece, waits at most that long for it and gives up at once when stop_signal_fd()
// turns readable. Why: a port handed out by bind(0) can be taken by any other program's
// listener between the user's choice and the connect; it accepts and never answers, and a
// plain recv with a 5 s SO_RCVTIMEO kept an scancel waiting that long (seen once in CI:
// 5.15 s).
bool recv_all(int fd, char* p, size_t n, double stop_aware_s = -1) {
  while (n > 0) {
    if (stop_aware_s >= 0) {
      pollfd ps[2] = {{fd, POLLIN, 0}, {stop_signal_fd(), POLLIN, 0}};
      const int rc = ::poll(ps, ps[1].fd >= 0 ? 2 : 1, std::max(1, static_cast<int>(stop_aware_s * 1000)));
      if (rc < 0 && errno == EINTR) continue;
      if (rc <= 0 || (ps[1].revents & POLLIN)) return false;
    }
    ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

void set_io_timeout(int fd, double s) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(s);
  tv.tv_usec = static_cast<suseconds_t>((s - static_cast<double>(tv.tv_sec)) * 1e6);
  if (tv.tv_sec == 0 && tv.tv_usec == 0) tv.tv_usec = 1000;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

// One non-blocking connect attempt of at most `budget` seconds; returns the fd or -1 (errno_out set).
int try_connect(const addrinfo* ai, double budget, int* errno_out) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) {
    *errno_out = errno;
    return -1;
  }
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd ps[2] = {{fd, POLLOUT, 0}, {stop_signal_fd(), POLLIN, 0}};  // a stop signal ends the wait
    rc = ::poll(ps, ps[1].fd >= 0 ? 2 : 1, static_cast<int>(budget * 1000));
    if (rc >= 1 && (ps[1].revents & POLLIN)) {
      errno = EINTR;
      rc = -1;
    } else if (rc >= 1) {
      int err = 0;
      socklen_t len = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err == 0 ? 0 : -1;
      errno = err;
    } else {
      errno = rc == 0 ? ETIMEDOUT : errno;
      rc = -1;
    }
  }
  if (rc != 0) {
    *errno_out = errno;
    ::close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, flags);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

std::string sockaddr_host(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
  else if (ss.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
  std::string s = buf;
  if (s.rfind("::ffff:", 0) == 0) s = s.substr(7);
  return s;
}

// Why a blocking send/recv under the socket timeouts failed (errno just after it).
const char* io_failure() {
  return errno == EAGAIN || errno == EWOULDBLOCK ? "no answer within --collective-timeout" : "connection closed";
}

std::string nonce_bytes(const Nonce& n) { return std::string(reinterpret_cast<const char*>(n.data()), n.size()); }
Nonce to_nonce(const char* p) {
  Nonce n{};
  std::memcpy(n.data(), p, n.size());
  return n;
}
Mac to_mac(const char* p) {
  Mac m{};
  std::memcpy(m.data(), p, m.size());
  return m;
}

}  // namespace

StoreLimits store_limits_for_world(int world_size) {
  const size_t w = static_cast<size_t>(std::clamp(world_size, 1, kMaxRendezvousRanks));
  StoreLimits l;
  l.max_key = 512;
  // The largest value a rank writes is a Gloo address list (2·W + 149 bytes compacted,
  // 8.3 KB at 4096 ranks); the others are < 1 KiB.
  l.max_value = 64 * 1024;
  // A rank writes ≤ 9 keys (join, devices, backend facts, 2 of `cnnscale env`, 2 per Gloo context).
  l.max_keys = 64 + 16 * w;
  // Per rank: ≤ 16 KiB besides Gloo's address lists (measured ~0.8 KiB) and 8·W bytes for
  // its two lists (measured 4·W): ~70 MiB needed at 4096 ranks, 193 MiB allowed.
  l.max_bytes = (size_t{1} << 20) + w * (16 * 1024 + 8 * w);
  l.max_connections = 64 + 4 * w;
  l.max_pending = 64;
  // At the Gloo setup every rank sends its lists and reads the others' one at a time:
  // ~2·W·(2·W + 149) bytes at most in flight, 67 MiB at 4096 ranks.
  l.max_in_flight = l.max_bytes;
  return l;
}

// ---- the server: one thread, non-blocking sockets, bounded ----
class RendezvousStore::Server {
 public:
  Server(const StoreOptions& o, int* port)
      : lim_(store_limits_for_world(o.world_size)),
        world_(o.world_size),
        token_(o.token),
        token_file_(!o.token_file.empty()) {
    listen_fd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool v6 = listen_fd_ >= 0;
    if (!v6) listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) fail("rank 0 cannot open a socket for the rendezvous store: ", std::strerror(errno));
    int one = 1, zero = 0;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    int rc;
    if (v6) {
      setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));  // IPv4 too
      sockaddr_in6 sa{};
      sa.sin6_family = AF_INET6;
      sa.sin6_addr = in6addr_any;
      sa.sin6_port = htons(static_cast<uint16_t>(*port));
      rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    } else {
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_addr.s_addr = htonl(INADDR_ANY);
      sa.sin_port = htons(static_cast<uint16_t>(*port));
      rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    }
    if (rc != 0) {
      const int e = errno;
      ::close(listen_fd_);
      if (e == EADDRINUSE)
        fail("rank 0 cannot serve the rendezvous store: port ", *port, " (", o.what,
             ") is already in use on this host (another job, or a leftover process of an earlier run); "
             "pick a free port, e.g. MASTER_PORT=$((20000 + RANDOM % 20000)), on every rank");
      fail("rank 0 cannot bind the rendezvous port ", *port, " (", o.what, "): ", std::strerror(e),
           (e == EACCES ? "; ports below 1024 need root, pick a higher MASTER_PORT" : ""));
    }
    if (::listen(listen_fd_, 1024) != 0) fail("rank 0 cannot listen on port ", *port, ": ", std::strerror(errno));
    fcntl(listen_fd_, F_SETFL, fcntl(listen_fd_, F_GETFL, 0) | O_NONBLOCK);
    if (*port == 0) {
      sockaddr_storage bound{};
      socklen_t len = sizeof(bound);
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
      *port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    }
    if (::pipe2(wake_, O_CLOEXEC) != 0) fail("rank 0 cannot create a pipe: ", std::strerror(errno));
    thread_ = std::thread([this] { run(); });
  }
  ~Server() {
    (void)!::write(wake_[1], "x", 1);
    if (thread_.joinable()) thread_.join();
    ::close(listen_fd_);
    for (int f : wake_) ::close(f);
  }

  RendezvousStore::Held held() const { return {keys_.load(), held_bytes_.load()}; }

  // What was refused or dropped, one clause per kind (see RendezvousStore::refusals()).
  std::string refusals() const {
    std::lock_guard<std::mutex> lock(incidents_mu_);
    std::string out;
    auto add = [&](Kind k, const std::string& what, const std::string& fix) {
      const Incident& i = incidents_[k];
      if (i.count == 0) return;
      out += (out.empty() ? "" : "; ") + what.substr(0, what.find('#')) + std::to_string(i.count) +
             what.substr(what.find('#') + 1) + (i.count == 1 ? " (from " : " (the last from ") + i.last + ")" +
             (fix.empty() ? "" : ": " + fix);
    };
    const std::string same_token = token_file_
                                       ? "every rank must read the same token file (the same --run-dir, on a "
                                         "file system every node shares) or have the same CNNSCALE_RENDEZVOUS_TOKEN"
                                       : "set CNNSCALE_RENDEZVOUS_TOKEN to the same value on every rank";
    add(wrong_token, "refused # client(s) that presented another rendezvous token", same_token);
    add(no_token, "refused # client(s) that presented no rendezvous token", same_token);
    add(awaiting_token_file, "refused # connection(s) of a client still waiting for its token file",
        "--run-dir must be the same directory on every rank, on a file system every node shares");
    add(other_version, "dropped # client(s) of another cnnscale version", "run the same cnnscale build on every rank");
    add(stranger,
        token_.empty()
            ? "dropped # connection(s) that did not complete the handshake within 2 s (or sent nothing for 0.25 s "
              "while others waited) or spoke another protocol"
            : "dropped # connection(s) that did not prove the job's rendezvous token within 2 s (or sent nothing "
              "for 0.25 s while others waited)",
        "strangers are connecting to its port (the handshake pool drops connections silent for 0.25 s when "
        "others wait, so ranks still get in)");
    add(busy,
        "refused # connection(s) beyond the " + std::to_string(lim_.max_connections) + " a world of " +
            std::to_string(world_) + " needs",
        "");
    add(full, "refused # write(s) beyond its limits",
        token_.empty()
            ? "a process that is not one of this job's ranks wrote to it; set CNNSCALE_RENDEZVOUS_TOKEN (the same on "
              "every "
              "rank) so that it serves only this job"
            : "a holder of the job's token wrote more than this job's ranks do; give each job a token of its own");
    add(out_of_memory, "ran out of memory # time(s)", "give rank 0 more memory");
    add(bad_request, "dropped # client(s) that sent a request beyond its limits", "");
    add(stalled, "dropped # client(s) that did not read their replies", "");
    add(in_flight, "dropped # client(s) beyond the bytes in flight a world needs", "");
    add(second_claim, "refused # claim(s) of a rank that had already joined",
        "two processes were started as one rank, or one that is not this job's rank claimed it");
    return out;
  }

 private:
  struct Conn {
    int fd = -1;
    std::string peer;
    std::string in, out;
    size_t out_off = 0;
    enum { hello, proof, ready } state = hello;  // hello: pending; proof, ready: trusted
    Nonce snonce{}, cnonce{};
    Clock::time_point accepted, last_sent;
    size_t counted = 0;  // in.size() + out.size() as in_flight_ counts them
    size_t received = 0;  // bytes received in all (0: a silent connection)
    bool close_after_send = false, drop = false;
    bool pending() const { return out_off < out.size(); }
  };

  // What the store refused or dropped, by kind: counted for rank 0's final messages, and
  // warned about at once, then at most every kWarnEveryS (issue 39 item 3).
  enum Kind {
    wrong_token,
    no_token,
    awaiting_token_file,
    other_version,
    stranger,
    busy,
    full,
    out_of_memory,
    bad_request,
    stalled,
    in_flight,
    second_claim,
    kKinds
  };
  struct Incident {
    size_t count = 0, unwarned = 0;
    std::string last;  // the peer of the last one
    Clock::time_point warned{};
    bool ever = false;
  };

  template <class Warning>
  void note(Kind k, const std::string& peer, Warning&& warning) {
    try {
      std::lock_guard<std::mutex> lock(incidents_mu_);
      Incident& i = incidents_[k];
      ++i.count;
      i.last = peer;
      if (i.ever && since(i.warned) < kWarnEveryS) {
        ++i.unwarned;
        return;
      }
      log_warn(
          "rendezvous store: " + warning() +
          (i.unwarned ? " (and " + std::to_string(i.unwarned) + " more like it since the last such warning)" : ""));
      i.ever = true;
      i.warned = Clock::now();
      i.unwarned = 0;
    } catch (...) {  // out of memory for the message: the count is what matters
    }
  }

  // The connection of the handshake pool that has sent nothing for the longest, at least
  // kSilentS since it was accepted; end() when there is none.
  std::vector<Conn>::iterator oldest_silent(std::vector<Conn>& conns) const {
    auto best = conns.end();
    for (auto it = conns.begin(); it != conns.end(); ++it)
      if (it->state == Conn::hello && it->received == 0 && !it->drop && since(it->accepted) >= kSilentS &&
          (best == conns.end() || it->accepted < best->accepted))
        best = it;
    return best;
  }

  void accept_one(std::vector<Conn>& conns, char* buf) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Conn c;
    c.fd = fd;
    c.peer = sockaddr_host(ss);
    c.accepted = c.last_sent = Clock::now();
    c.snonce = random_nonce();
    conns.push_back(std::move(c));
    receive(conns.back(), buf);  // a rank sends its hello right after connecting: it is often here already
  }

  // c would take the bytes in flight past the world's bound: dropped, and said.
  void drop_over_in_flight(Conn& c) {
    note(in_flight, c.peer, [&] {
      return "dropped a client at " + c.peer + ": the requests and replies in flight hold " +
             std::to_string(in_flight_) + " bytes, the most a world of " + std::to_string(world_) + " needs";
    });
    c.drop = true;
  }

  // Every reply goes out through here: one at a time per connection, within the bytes in flight.
  void reply(Conn& c, std::string bytes) {
    if (in_flight_ + bytes.size() > lim_.max_in_flight) {
      drop_over_in_flight(c);
      return;
    }
    c.out = std::move(bytes);
    c.out_off = 0;
    c.last_sent = Clock::now();
  }

  void receive(Conn& c, char* buf) {
    const ssize_t k = ::recv(c.fd, buf, 65536, 0);
    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      c.drop = true;
    } else if (k > 0 && in_flight_ + static_cast<size_t>(k) > lim_.max_in_flight) {
      drop_over_in_flight(c);
    } else if (k > 0) {
      c.received += static_cast<size_t>(k);
      c.in.append(buf, static_cast<size_t>(k));
      handle(c);
    }
    recount(c);
  }

  // in_flight_ follows c's buffers (called after each change; between, it counts more).
  void recount(Conn& c) {
    const size_t now = c.in.size() + c.out.size();
    in_flight_ = in_flight_ - c.counted + now;
    c.counted = now;
  }

  // The hello (client: "CNSTORE3" flags nonce [MAC("cnnscale-hello"|nonce|0) with a token]).
  void hello(Conn& c) {
    if (c.in.size() >= kHelloLen && c.in.compare(0, kHelloLen, kHello) != 0) {
      if (c.in.compare(0, kHelloLen - 1, kHello, kHelloLen - 1) == 0)
        note(other_version, c.peer, [&] {
          return "dropped a client at " + c.peer + " of another cnnscale version (its hello is " +
                 escape_unprintable(c.in.substr(0, kHelloLen)) + ", this one's " + kHello + ")";
        });
      else
        note(stranger, c.peer,
             [&] { return "dropped a connection from " + c.peer + " that does not speak the store's protocol"; });
      c.drop = true;
      return;
    }
    if (c.in.size() < kHelloLen + 1 + kNonceBytes) return;
    const char flags = c.in[kHelloLen];
    const size_t need = kHelloLen + 1 + kNonceBytes + (flags == kToken ? 32 : 0);
    if (c.in.size() < need) return;
    c.cnonce = to_nonce(&c.in[kHelloLen + 1]);
    char mode = kOpen;
    if (!token_.empty()) {
      const bool proven = flags == kToken && same_mac(to_mac(&c.in[kHelloLen + 1 + kNonceBytes]),
                                                      rendezvous_mac(token_, kHelloLabel, c.cnonce, Nonce{}));
      mode = proven ? kProve : kRefused;
      if (flags == kToken && !proven)
        note(wrong_token, c.peer,
             [&] { return "refused a client at " + c.peer + " that presented another rendezvous token"; });
      else if (flags == kAwaitingTokenFile)
        note(awaiting_token_file, c.peer, [&] {
          return "refused a client at " + c.peer +
                 " that has no rendezvous token yet: it waits for the token file in its --run-dir (rank 0 wrote "
                 "one in its own; they must be the same directory, on a file system every node shares)";
        });
      else if (flags != kToken)
        note(no_token, c.peer, [&] { return "refused a client at " + c.peer + " that presented no rendezvous token"; });
    }
    if (mode != kRefused && trusted_ >= lim_.max_connections) {
      mode = kBusy;
      note(busy, c.peer, [&] {
        return "refused a client at " + c.peer + ": " + std::to_string(trusted_) +
               " clients are connected, the most a world of " + std::to_string(world_) + " needs";
      });
    }
    c.in.erase(0, need);
    std::string r(kHello, kHelloLen);
    r.push_back(mode);
    r += nonce_bytes(c.snonce);
    reply(c, std::move(r));
    if (mode == kRefused || mode == kBusy) {
      c.close_after_send = true;
      return;
    }
    c.state = mode == kOpen ? Conn::ready : Conn::proof;
    ++trusted_;
  }

  // Handles complete messages while no reply is pending (a client that does not read
  // its replies gets no more served: what it can make us hold is one reply).
  void handle(Conn& c) {
    while (!c.pending() && !c.drop && !c.close_after_send) {
      if (c.state == Conn::hello) {
        hello(c);
        if (c.state == Conn::hello) return;
        continue;
      }
      if (c.state == Conn::proof) {
        if (c.in.size() < 32) return;
        const Mac got = to_mac(c.in.data());
        c.in.erase(0, 32);
        if (!same_mac(got, rendezvous_mac(token_, "cnnscale-client", c.snonce, c.cnonce))) {
          note(wrong_token, c.peer,
               [&] { return "refused a client at " + c.peer + " that presented another rendezvous token"; });
          reply(c, std::string(1, kNo));
          c.close_after_send = true;
          return;
        }
        const Mac mine = rendezvous_mac(token_, "cnnscale-server", c.cnonce, c.snonce);
        std::string r(1, kYes);
        r.append(reinterpret_cast<const char*>(mine.data()), mine.size());
        reply(c, std::move(r));
        c.state = Conn::ready;
        continue;
      }
      if (c.in.size() < 5) return;
      const char op = c.in[0];
      if (op != 's' && op != 'c' && op != 'g') {
        note(bad_request, c.peer, [&] { return "dropped a client at " + c.peer + " that sent an unknown request"; });
        c.drop = true;
        return;
      }
      const uint64_t klen = get_le(&c.in[1], 4);
      if (klen > lim_.max_key) {
        note(bad_request, c.peer, [&] {
          return "dropped a client at " + c.peer + " that sent a key of " + std::to_string(klen) + " bytes (at most " +
                 std::to_string(lim_.max_key) + ")";
        });
        c.drop = true;
        return;
      }
      size_t need = 5 + klen;
      uint64_t vlen = 0;
      if (op != 'g') {
        if (c.in.size() < need + 4) return;
        vlen = get_le(&c.in[need], 4);
        if (vlen > lim_.max_value) {
          note(bad_request, c.peer, [&] {
            return "dropped a client at " + c.peer + " that sent a value of " + std::to_string(vlen) +
                   " bytes (at most " + std::to_string(lim_.max_value) + ")";
          });
          c.drop = true;
          return;
        }
        need += 4 + vlen;
      }
      if (c.in.size() < need) return;
      const std::string key = c.in.substr(5, klen);
      std::string r;
      if (op == 'g') {
        auto it = kv_.find(key);
        r.push_back(it != kv_.end() ? kYes : kNo);
        if (it != kv_.end()) {
          put_u32(r, static_cast<uint32_t>(it->second.size()));
          r += it->second;
        }
      } else {
        r.push_back(store(c, key, vlen));
      }
      c.in.erase(0, need);
      reply(c, std::move(r));
    }
  }

  // Stores the value of a set/create request at the front of c.in; its reply status.
  char store(Conn& c, const std::string& key, uint64_t vlen) {
    const char op = c.in[0];
    auto it = kv_.find(key);
    const bool absent = it == kv_.end();
    if (op == 'c' && !absent) {
      if (key.rfind(kJoinPrefix, 0) == 0) second_claim_of(c, key, it->second);
      return kNo;
    }
    const size_t old = absent ? 0 : key.size() + it->second.size();
    const size_t bytes_after = bytes_ - old + key.size() + vlen;
    if ((absent && kv_.size() + 1 > lim_.max_keys) || bytes_after > lim_.max_bytes) {
      note(full, c.peer, [&] {
        return "refused to store a key from " + c.peer + ": the store holds " + std::to_string(kv_.size()) +
               " keys and " + std::to_string(bytes_) + " bytes, and a world of " + std::to_string(world_) +
               " needs at most " + std::to_string(lim_.max_keys) + " keys and " + std::to_string(lim_.max_bytes) +
               " bytes" + (token_.empty() ? "" : " (the client proved the job's rendezvous token)");
      });
      return kFull;
    }
    try {
      std::string& slot = absent ? kv_[key] : it->second;
      try {
        slot.assign(c.in, 5 + key.size() + 4, vlen);
      } catch (const std::bad_alloc&) {
        if (absent) kv_.erase(key);
        throw;
      }
    } catch (const std::bad_alloc&) {  // issue 39 item 1: once an uncaught abort (exit 134) under `ulimit -v`
      note(out_of_memory, c.peer, [&] {
        return out_of_memory_message("holding the rendezvous store (" + std::to_string(kv_.size()) + " keys, " +
                                         std::to_string(bytes_) + " bytes) for a client at " + c.peer,
                                     vlen,
                                     "the write is refused; give rank 0 more memory" +
                                         std::string(token_.empty() ? " or set CNNSCALE_RENDEZVOUS_TOKEN" : ""));
      });
      return kOutOfMemory;
    }
    bytes_ = bytes_after;
    keys_ = kv_.size();
    held_bytes_ = bytes_;
    if (op == 'c' && key.rfind(kJoinPrefix, 0) == 0) {
      std::lock_guard<std::mutex> lock(incidents_mu_);
      claims_[key] = c.peer;
    }
    return kYes;
  }

  // A rank's join key created a second time (issue 48 item 14: a holder of the job's token
  // claimed rank 1 first, and the real rank 1 was kept out): warned about at once, naming
  // both claims, and recorded under cnnscale/claimed-twice/R ("host\naddress" of the
  // second) so that rank 0, waiting on a claim it doubts, learns of it.
  void second_claim_of(Conn& c, const std::string& key, const std::string& first_value) {
    const std::string rank = key.substr(std::strlen(kJoinPrefix));
    const std::string second_value = c.in.substr(5 + key.size() + 4, get_le(&c.in[5 + key.size()], 4));
    // A stranger's bytes (fuzz_rendezvous: control characters reached rank 0's terminal).
    const std::string shown_rank = escape_unprintable(rank, 32);
    const auto host = [](const std::string& v) {
      std::string h(1, '\'');  // (not "'" + …: GCC 12's -Wrestrict false positive)
      h += escape_unprintable(v.substr(0, v.find('\n')), 64);
      h.push_back('\'');
      return h;
    };
    std::string first_at;
    {
      std::lock_guard<std::mutex> lock(incidents_mu_);
      first_at = claims_.count(key) ? claims_[key] : "?";
    }
    note(second_claim, c.peer, [&] {
      return "rank " + shown_rank + " was claimed again, by host " + host(second_value) + " at " + c.peer +
             "; it had joined from host " + host(first_value) + " at " + first_at +
             ": two processes were started as rank " + shown_rank + ", or one that is not this job's rank claimed it";
    });
    const std::string mark = std::string(kClaimedTwicePrefix) + rank;
    if (!kv_.count(mark) && kv_.size() < lim_.max_keys + 64) {  // one per rank: bounded by the world
      kv_[mark] = second_value.substr(0, second_value.find('\n')).substr(0, 256) + "\n" + c.peer;
      keys_ = kv_.size();
    }
  }

 public:
  // The address of the client that created join key `key` ("" if none did).
  std::string claim_address(const std::string& key) const {
    std::lock_guard<std::mutex> lock(incidents_mu_);
    auto it = claims_.find(key);
    return it == claims_.end() ? std::string() : it->second;
  }

 private:

  // Sends or receives what is due on c (ev: its poll events).
  void serve(Conn& c, short ev, char* buf) {
    if (ev & (POLLERR | POLLNVAL)) c.drop = true;
    if (!c.drop && (ev & POLLOUT) && c.pending()) {
      const ssize_t k = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (k > 0) {
        c.out_off += static_cast<size_t>(k);
        c.last_sent = Clock::now();
      } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        c.drop = true;
      }
      if (!c.pending()) {
        c.out.clear();
        c.out_off = 0;
        if (c.close_after_send) c.drop = true;
        else handle(c);  // requests that arrived while the reply was going out
      }
      recount(c);
    } else if (!c.drop && (ev & (POLLIN | POLLHUP))) {
      receive(c, buf);
    }
  }

  void run() {
    std::vector<Conn> conns;
    std::vector<pollfd> fds;
    std::vector<char> buf(65536);
    for (;;) {
      // Connections in their handshake have a pool of their own (issue 39 item 2): while it
      // is full, new ones wait in the kernel's queue, in order, unless a connection of the
      // pool has been silent for kSilentS: it then makes room for the next (issue 48 item 4).
      size_t pending = 0;
      trusted_ = 0;
      for (const auto& c : conns) (c.state == Conn::hello ? pending : trusted_) += 1;
      const bool room = pending < lim_.max_pending || oldest_silent(conns) != conns.end();
      // Full of connections that are not yet silent long enough: look again within kSilentS.
      fds.assign({{wake_[0], POLLIN, 0}, {listen_fd_, static_cast<short>(room ? POLLIN : 0), 0}});
      for (const auto& c : conns) fds.push_back({c.fd, static_cast<short>(c.pending() ? POLLOUT : POLLIN), 0});
      if (::poll(fds.data(), fds.size(), room ? 200 : static_cast<int>(kSilentS * 1000 / 2)) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (fds[0].revents) break;
      const size_t n = conns.size();  // accept after the loop below: fds[i + 2] are these
      for (size_t i = 0; i < n; ++i) {
        Conn& c = conns[i];
        try {
          serve(c, fds[i + 2].revents, buf.data());
        } catch (const std::bad_alloc&) {
          note(out_of_memory, c.peer,
               [&] { return "dropped a client at " + c.peer + ": out of memory while serving it"; });
          c.drop = true;
        } catch (const std::exception& e) {
          note(bad_request, c.peer, [&] { return "dropped a client at " + c.peer + ": " + e.what(); });
          c.drop = true;
        }
        if (!c.drop && c.state != Conn::ready && since(c.accepted) > kHandshakeS) {
          if (!c.close_after_send)  // (a refused client that does not read its refusal was counted)
            note(stranger, c.peer, [&] {
              return "dropped a connection from " + c.peer +
                     (token_.empty() ? " that did not complete the handshake within 2 s"
                                     : " that did not prove the job's rendezvous token within 2 s (a stranger?)");
            });
          c.drop = true;
        }
        if (!c.drop && c.pending() && since(c.last_sent) > kStalledS) {
          note(stalled, c.peer,
               [&] { return "dropped a client at " + c.peer + " that read none of its reply for 10 s"; });
          c.drop = true;
        }
      }
      for (size_t i = conns.size(); i-- > 0;)
        if (conns[i].drop) {
          if (conns[i].state == Conn::hello) --pending;
          in_flight_ -= conns[i].counted;
          ::close(conns[i].fd);
          conns.erase(conns.begin() + static_cast<long>(i));
        }
      if (fds[1].revents & POLLIN)
        for (;; ++pending) {  // a burst of connections; the rest on the next turn
          if (pending >= lim_.max_pending) {
            const auto quiet = oldest_silent(conns);
            if (quiet == conns.end()) break;
            note(stranger, quiet->peer, [&] {
              return "dropped a connection from " + quiet->peer + " that sent nothing for " +
                     std::to_string(static_cast<int>(kSilentS * 1000)) +
                     " ms while others waited (a stranger holding the port?)";
            });
            in_flight_ -= quiet->counted;
            ::close(quiet->fd);
            conns.erase(quiet);
            --pending;
          }
          const size_t before = conns.size();
          try {
            accept_one(conns, buf.data());
          } catch (const std::exception&) {  // out of memory (or no random bytes): it waits in the queue
            if (conns.size() > before) {
              in_flight_ -= conns.back().counted;
              ::close(conns.back().fd);
              conns.pop_back();
            }
            break;
          }
          if (conns.size() == before) break;
        }
    }
    for (auto& c : conns) ::close(c.fd);
  }

  StoreLimits lim_;
  int world_;
  std::string token_;
  bool token_file_;  // the token is rank 0's token file's (not CNNSCALE_RENDEZVOUS_TOKEN)
  std::map<std::string, std::string> kv_;
  size_t bytes_ = 0;
  size_t trusted_ = 0;    // connections past the hello (the server thread's)
  size_t in_flight_ = 0;  // bytes of requests being received and replies being sent, all connections
  std::atomic<size_t> keys_{0}, held_bytes_{0};
  mutable std::mutex incidents_mu_;
  std::array<Incident, kKinds> incidents_{};
  std::map<std::string, std::string> claims_;  // join key → the address of the client that created it
  int listen_fd_ = -1, wake_[2] = {-1, -1};
  std::thread thread_;
};

// ---- the client ----
RendezvousStore::RendezvousStore(StoreOptions opts) : opts_(std::move(opts)) {
  int port = opts_.port;
  if (port < 0 || port > 65535 || (port == 0 && !opts_.serve))
    fail("the rendezvous port ", port, " from ", opts_.what, " is not a TCP port (1-65535)");
  if (opts_.serve) server_ = std::make_unique<Server>(opts_, &port);
  opts_.port = port;
  where_ = opts_.addr + ":" + std::to_string(port) + " (" + opts_.what + ")";
  try {
    fd_ = connect_client(opts_.timeout_s);
  } catch (...) {
    server_.reset();
    throw;
  }
}

RendezvousStore::~RendezvousStore() {
  if (fd_ >= 0) ::close(fd_);
  if (server_ && !opts_.token_file.empty()) ::unlink(opts_.token_file.c_str());  // a finished job leaves no secret
  server_.reset();
}

RendezvousStore::Held RendezvousStore::held() const { return server_ ? server_->held() : Held{}; }

std::string RendezvousStore::claim_address(const std::string& key) const {
  return server_ ? server_->claim_address(key) : std::string();
}

std::string RendezvousStore::refusals() const {
  const std::string r = server_ ? server_->refusals() : std::string();
  return r.empty() ? r : "meanwhile rank 0's rendezvous store " + r;
}

std::string RendezvousStore::who_serves() const {
  if (opts_.protocol == StoreProtocol::torch) return "torchrun's agent, which serves it,";
  if (server_) return "this rank serves it itself and";
  return "rank 0, which serves it,";
}

int RendezvousStore::connect_client(double timeout_s) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port_s = std::to_string(opts_.port);
  const int gai = ::getaddrinfo(opts_.addr.c_str(), port_s.c_str(), &hints, &res);
  if (gai != 0 || !res)
    fail("the rendezvous host '", opts_.addr, "' (", opts_.what, ") does not resolve (", gai_strerror(gai),
         "); set MASTER_ADDR to rank 0's host name or IP address, the same on every rank");
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, freeaddrinfo);
  const auto t0 = Clock::now();
  int last_errno = 0;
  int hello_failure = 0;  // 1: connected but no answer; 2: an answer that is not the store's
  bool waiting_for_token_file = false, stale_token = false, busy = false;
  const bool torch = opts_.protocol == StoreProtocol::torch;
  for (;;) {
    for (addrinfo* ai = res; ai; ai = ai->ai_next) {
      const double left = timeout_s - since(t0);
      if (left <= 0) break;
      const int fd = try_connect(ai, std::min(left, 2.0), &last_errno);
      if (fd < 0) continue;
      // Our store may keep a new connection queued while strangers fill its handshake pool
      // (issue 39 item 2): wait for its answer as long as the deadline allows.
      const double io_s = std::max(0.001, torch ? std::min(5.0, timeout_s - since(t0)) : timeout_s - since(t0));
      set_io_timeout(fd, io_s);
      bool ok = false;
      if (torch) {  // VALIDATE + magic, then PING with a nonce the store must echo
        const uint32_t nonce = static_cast<uint32_t>(::getpid());
        std::string m(1, static_cast<char>(kTorchValidate));
        put_u32(m, kTorchMagic);
        m.push_back(static_cast<char>(kTorchPing));
        put_u32(m, nonce);
        char back[4];
        const bool answered = send_all(fd, m.data(), m.size()) && recv_all(fd, back, 4, io_s);
        ok = answered && get_le(back, 4) == nonce;
        if (!ok) hello_failure = std::max(hello_failure, answered ? 2 : 1);
      } else {
        // The token: the environment's, else the token file's (rank 0 writes it before it serves).
        std::string token = opts_.token;
        if (token.empty() && !opts_.token_file.empty())
          if (auto t = read_token_file(opts_.token_file)) token = *t;
        const bool from_file = opts_.token.empty() && !token.empty();
        const char flags = !token.empty() ? kToken : opts_.token_file.empty() ? kNoToken : kAwaitingTokenFile;
        const Nonce cn = random_nonce();
        std::string m(kHello, kHelloLen);
        m.push_back(flags);
        m += nonce_bytes(cn);
        if (flags == kToken) {
          const Mac pre = rendezvous_mac(token, kHelloLabel, cn, Nonce{});
          m.append(reinterpret_cast<const char*>(pre.data()), pre.size());
        }
        char back[kHelloLen + 1 + kNonceBytes];
        const bool answered = send_all(fd, m.data(), m.size()) && recv_all(fd, back, sizeof(back), io_s);
        const char mode = answered ? back[kHelloLen] : -1;
        if (!answered || std::memcmp(back, kHello, kHelloLen) != 0 || mode < kOpen || mode > kBusy) {
          hello_failure = std::max(hello_failure, answered ? 2 : 1);
        } else if (mode == kOpen) {
          if (!opts_.token.empty() && !server_) {
            ::close(fd);
            fail("this rank has a rendezvous token (CNNSCALE_RENDEZVOUS_TOKEN) but the store at ", where_,
                 " asks for none: set CNNSCALE_RENDEZVOUS_TOKEN to the same value on every rank, rank 0 too");
          }
          ok = true;
        } else if (mode == kBusy) {
          busy = true;  // its connections are taken; one may close
        } else if (mode == kRefused && flags == kNoToken) {
          ::close(fd);
          fail("the rendezvous store at ", where_,
               " requires the job's token (rank 0 has CNNSCALE_RENDEZVOUS_TOKEN or a token file in its --run-dir) "
               "but this rank has none: set CNNSCALE_RENDEZVOUS_TOKEN to the same value on every rank, or give "
               "every rank the same --run-dir on a shared file system");
        } else if (mode == kRefused && flags == kAwaitingTokenFile) {
          waiting_for_token_file = true;
        } else {  // kRefused although this rank sent a token, or kProve: the challenge, both ways
          const Nonce sn = to_nonce(back + kHelloLen + 1);
          char verdict = kNo;  // kRefused: the store refused the token at the hello
          char theirs[32];
          if (mode == kProve) {
            const Mac proof = rendezvous_mac(token, "cnnscale-client", sn, cn);
            if (!send_all(fd, reinterpret_cast<const char*>(proof.data()), proof.size()) ||
                !recv_all(fd, &verdict, 1, io_s) || (verdict == kYes && !recv_all(fd, theirs, 32, io_s)))
              verdict = -1;
          }
          if (verdict == kYes) {
            if (!same_mac(to_mac(theirs), rendezvous_mac(token, "cnnscale-server", cn, sn))) {
              ::close(fd);
              fail("the store at ", where_,
                   " does not prove it holds the job's rendezvous token: it is not rank 0's store (another "
                   "program answers on that port). Check MASTER_ADDR/MASTER_PORT");
            }
            ok = true;
            authenticated_ = true;
          } else if (verdict == kNo) {
            if (!from_file) {
              ::close(fd);
              fail("rank 0's rendezvous store at ", where_,
                   " refused this rank's CNNSCALE_RENDEZVOUS_TOKEN: set the same value on every rank");
            }
            stale_token = true;  // an older run's token file: rank 0 is writing its own; read it again
          } else {
            hello_failure = std::max(hello_failure, 1);
          }
        }
      }
      if (ok) {
        sockaddr_storage local{};
        socklen_t len = sizeof(local);
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
        local_address_ = sockaddr_host(local);
        return fd;
      }
      ::close(fd);
    }
    if (const int sig = stop_signal_received())  // scancel, torchrun's restart: never wait out the timeout
      fail("stopped by ", stop_signal_name(sig), " while connecting to the rendezvous store at ", where_,
           ": nothing was trained");
    if (since(t0) >= timeout_s) {
      if (waiting_for_token_file || stale_token)
        fail("the rendezvous store at ", where_, " requires the job's token, and the token file ", opts_.token_file,
             stale_token ? " holds another token (an older run's?)" : " did not appear", " within ", timeout_s,
             " s (--collective-timeout): rank 0 writes it there, so --run-dir must be the same directory, on a file "
             "system every node shares; or set CNNSCALE_RENDEZVOUS_TOKEN to the same value on every rank");
      if (busy)
        fail("rank 0's rendezvous store at ", where_, " refused this rank's connection until --collective-timeout (",
             timeout_s, " s): ", store_limits_for_world(opts_.world_size).max_connections,
             " clients were connected to it, the most a world of ", opts_.world_size,
             " needs: processes that are not this job's ranks hold connections (set CNNSCALE_RENDEZVOUS_TOKEN, the "
             "same on every rank), or ranks of a larger job use the same MASTER_PORT");
      if (hello_failure == 2)
        fail("something at ", where_, " answers, but it is not ",
             torch ? "torchrun's store (TORCHELASTIC_USE_AGENT_STORE=True)" : "cnnscale's rendezvous store",
             " (another program holds that port, or ranks of different cnnscale versions?); pick a free MASTER_PORT, "
             "the same on every rank");
      if (hello_failure == 1)
        fail("connected to ", where_, " but no rendezvous store answered within ", timeout_s,
             " s (--collective-timeout): that address is not rank 0's (a proxy or another program accepted the "
             "connection) or rank 0 is stuck",
             !torch && !opts_.token.empty()
                 ? ", or strangers flood rank 0's store with connections that cannot prove the job's token (rank 0's "
                   "output counts what it refused; raise --collective-timeout to outwait them)"
                 : "",
             ". Check MASTER_ADDR/MASTER_PORT, the same on every rank");
      if (torch)
        fail("could not reach torchrun's store at ", where_, " within ", timeout_s, " s (--collective-timeout; ",
             "last error: ", std::strerror(last_errno), "): torchrun's agent serves it; is torchrun still running?");
      fail("could not reach the rendezvous store at ", where_, " within ", timeout_s,
           " s (--collective-timeout; last error: ", std::strerror(last_errno),
           "): rank 0 serves it, so rank 0 must be running and that address must name rank 0's host. Check "
           "MASTER_ADDR/MASTER_PORT (the same on every rank), that rank 0 started, and firewalls");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void RendezvousStore::lost(const char* what) const {
  fail("lost the rendezvous store at ", where_, " (", what, "): ", who_serves(),
       opts_.protocol == StoreProtocol::torch || !server_
           ? " stopped (its output names the cause, e.g. a rank that did not join) or the network failed"
           : " could not answer in time (an overloaded host?)");
}

std::string RendezvousStore::request(char op, const std::string& key, const std::string* value, bool* status) {
  if (value && value->size() > store_limits_for_world(opts_.world_size).max_value)
    internal_error("a rendezvous value of ", value->size(), " bytes (key ", key, ") exceeds the store's limit of ",
                   store_limits_for_world(opts_.world_size).max_value, " bytes");
  std::string msg(1, op);
  put_u32(msg, static_cast<uint32_t>(key.size()));
  msg += key;
  if (value) {
    put_u32(msg, static_cast<uint32_t>(value->size()));
    msg += *value;
  }
  std::lock_guard<std::mutex> lock(mu_);
  set_io_timeout(fd_, opts_.timeout_s);
  char st = 0;
  std::string out;
  errno = 0;
  bool ok = send_all(fd_, msg.data(), msg.size()) && recv_all(fd_, &st, 1);
  if (ok && op == 'g' && st == 1) {
    char len[4];
    ok = recv_all(fd_, len, 4);
    const uint64_t n = ok ? get_le(len, 4) : 0;
    if (ok && n > store_limits_for_world(opts_.world_size).max_value) lost("a reply larger than any value");
    if (ok) {
      out.resize(n);
      ok = recv_all(fd_, out.data(), out.size());
    }
  }
  if (!ok) lost(io_failure());
  const StoreLimits lim = store_limits_for_world(opts_.world_size);
  const bool token = authenticated_ || !opts_.token.empty();  // only token holders write to this store
  if (st == kFull) {
    const std::string full = "the rendezvous store at " + where_ + " is full: it holds the most a world of " +
                             std::to_string(opts_.world_size) + " ranks needs (" + std::to_string(lim.max_keys) +
                             " keys and " + format_bytes(lim.max_bytes) + ")";
    if (token)  // issue 39 item 4: not "set CNNSCALE_RENDEZVOUS_TOKEN", which is set
      fail(full,
           ", and every client that wrote to it proved the job's rendezvous token: a process that holds this "
           "job's token (another job given the same token and MASTER_PORT, or a rank of another cnnscale build) wrote "
           "more than this job's ranks do. Give each job a token of its own, and every rank the same cnnscale build");
    fail(full, ", so a process that is not one of this job's ranks is writing to it. Set CNNSCALE_RENDEZVOUS_TOKEN "
               "(the same on every rank) so that the store serves only this job");
  }
  if (st == kOutOfMemory)  // issue 39 item 1: once an abort of rank 0 (std::bad_alloc)
    fail("rank 0 ran out of memory holding the rendezvous store at ", where_, " (a world of ", opts_.world_size,
         " ranks may make it hold ", format_bytes(lim.max_bytes),
         "): give rank 0 more memory (`ulimit -v`, the job's "
         "memory request)",
         token
             ? ""
             : "; without CNNSCALE_RENDEZVOUS_TOKEN a process that is not one of this job's ranks may have filled it");
  *status = st == kYes;
  return out;
}

void RendezvousStore::torch_send(const std::string& msg) {
  set_io_timeout(fd_, opts_.timeout_s);
  errno = 0;
  if (!send_all(fd_, msg.data(), msg.size())) lost(io_failure());
}

std::string RendezvousStore::torch_recv(size_t n) {
  std::string out(n, '\0');
  errno = 0;
  if (!recv_all(fd_, out.data(), n)) lost(io_failure());
  return out;
}

bool RendezvousStore::torch_check(const std::vector<std::string>& keys) {
  std::string m(1, static_cast<char>(kTorchCheck));
  put_u64(m, keys.size());
  for (const auto& k : keys) put_torch_string(m, opts_.key_prefix + k);
  std::lock_guard<std::mutex> lock(mu_);
  torch_send(m);
  return torch_recv(1)[0] == 0;  // CheckResponseType::READY
}

void RendezvousStore::set(const std::string& key, const std::string& value) {
  if (opts_.protocol == StoreProtocol::torch) {
    std::string m(1, static_cast<char>(kTorchSet));
    put_torch_string(m, opts_.key_prefix + key);
    put_torch_string(m, value);
    std::lock_guard<std::mutex> lock(mu_);
    torch_send(m);
    return;
  }
  bool st = false;
  request('s', opts_.key_prefix + key, &value, &st);
}

bool RendezvousStore::create(const std::string& key, const std::string& value) {
  if (opts_.protocol == StoreProtocol::torch) {
    // ADD counts the claims: the first claimant (1) writes the key.
    std::string m(1, static_cast<char>(kTorchAdd));
    put_torch_string(m, opts_.key_prefix + key + "/claims");
    put_u64(m, 1);
    int64_t n = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      torch_send(m);
      n = static_cast<int64_t>(get_le(torch_recv(8).data(), 8));
    }
    if (n != 1) return false;
    set(key, value);
    return true;
  }
  bool st = false;
  request('c', opts_.key_prefix + key, &value, &st);
  return st;
}

bool RendezvousStore::try_get(const std::string& key, std::string* value) {
  if (opts_.protocol == StoreProtocol::torch) {
    if (!torch_check({key})) return false;
    std::string m(1, static_cast<char>(kTorchGet));
    put_torch_string(m, opts_.key_prefix + key);
    std::lock_guard<std::mutex> lock(mu_);
    torch_send(m);
    const uint64_t n = get_le(torch_recv(8).data(), 8);
    if (n > store_limits_for_world(opts_.world_size).max_value) lost("a reply larger than any value");
    std::string v = torch_recv(n);
    if (value) *value = std::move(v);
    return true;
  }
  bool st = false;
  std::string v = request('g', opts_.key_prefix + key, nullptr, &st);
  if (st && value) *value = std::move(v);
  return st;
}

void RendezvousStore::stop_if_signalled() const {
  if (const int sig = stop_signal_received())
    fail("stopped by ", stop_signal_name(sig), " while waiting for the other ranks at the rendezvous store at ", where_,
         ": nothing was trained");
}

std::vector<std::string> RendezvousStore::wait(const std::vector<std::string>& keys,
                                               std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<std::string> missing = keys;
  for (;;) {
    if (opts_.protocol == StoreProtocol::torch && !missing.empty() && torch_check(missing)) missing.clear();
    if (opts_.protocol == StoreProtocol::cnnscale || Clock::now() >= deadline) {
      std::vector<std::string> still;
      for (const auto& k : missing)
        if (!try_get(k, nullptr)) still.push_back(k);
      missing.swap(still);
    }
    if (missing.empty() || Clock::now() >= deadline) return missing;
    stop_if_signalled();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string RendezvousStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string v;
  while (!try_get(key, &v)) {
    if (Clock::now() >= deadline)
      fail("the rendezvous key '", key, "' did not appear in the store at ", where_, " within ",
           std::chrono::duration<double>(timeout).count(), " s: a rank stopped during the rendezvous",
           refusals().empty() ? "" : "; " + refusals());
    stop_if_signalled();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return v;
}

}  // namespace cnnscale
