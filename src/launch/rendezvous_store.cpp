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
#include <cerrno>
#include <cstring>
#include <map>

#include "util/error.hpp"
#include "util/stop_signal.hpp"

namespace cnnscale {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kHello[] = "CNSTORE1";
constexpr size_t kHelloLen = 8;
constexpr uint32_t kMaxField = 64u << 20;  // no key or value is larger

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
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
bool recv_all(int fd, char* p, size_t n) {
  while (n > 0) {
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
    pollfd p{fd, POLLOUT, 0};
    rc = ::poll(&p, 1, static_cast<int>(budget * 1000));
    if (rc == 1) {
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
  return buf;
}

}  // namespace

RendezvousStore::RendezvousStore(const std::string& addr, int port_in, bool is_server, double timeout_s,
                                 std::string what)
    : where_(addr + ":" + std::to_string(port_in) + " (" + what + ")"), timeout_s_(timeout_s) {
  int port = port_in;  // 0 for a server: any free port (a one-process world)
  if (port < 0 || port > 65535 || (port == 0 && !is_server))
    fail("the rendezvous port ", port, " from ", what, " is not a TCP port (1-65535)");
  if (is_server) {
    listen_fd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool v6 = listen_fd_ >= 0;
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
      sa.sin6_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    } else {
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_addr.s_addr = htonl(INADDR_ANY);
      sa.sin_port = htons(static_cast<uint16_t>(port));
      rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    }
    if (rc != 0) {
      const int e = errno;
      ::close(listen_fd_);
      if (e == EADDRINUSE)
        fail("rank 0 cannot serve the rendezvous store: port ", port, " (", what,
             ") is already in use on this host (another job, or a leftover process of an earlier run); "
             "pick a free port, e.g. MASTER_PORT=$((20000 + RANDOM % 20000)), on every rank");
      fail("rank 0 cannot bind the rendezvous port ", port, " (", what, "): ", std::strerror(e),
           (e == EACCES ? "; ports below 1024 need root, pick a higher MASTER_PORT" : ""));
    }
    if (::listen(listen_fd_, 1024) != 0) fail("rank 0 cannot listen on port ", port, ": ", std::strerror(errno));
    if (port == 0) {
      sockaddr_storage bound{};
      socklen_t len = sizeof(bound);
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
      port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      where_ = addr + ":" + std::to_string(port) + " (" + what + ")";
    }
    if (::pipe2(wake_, O_CLOEXEC) != 0) fail("rank 0 cannot create a pipe: ", std::strerror(errno));
    server_ = std::thread([this] { serve(); });
  }

  // Client: resolve, then connect with retries until the deadline (rank 0 may start later).
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port_s = std::to_string(port);
  const int gai = ::getaddrinfo(addr.c_str(), port_s.c_str(), &hints, &res);
  if (gai != 0 || !res)
    fail("the rendezvous host '", addr, "' (", what, ") does not resolve (", gai_strerror(gai),
         "); set MASTER_ADDR to rank 0's host name or IP address, the same on every rank");
  const auto t0 = Clock::now();
  int last_errno = 0;
  int hello_failure = 0;  // 1: connected but no answer; 2: an answer that is not the store's
  while (fd_ < 0) {
    for (addrinfo* ai = res; ai && fd_ < 0; ai = ai->ai_next) {
      const double left = timeout_s_ - since(t0);
      if (left <= 0) break;
      int fd = try_connect(ai, std::min(left, 2.0), &last_errno);
      if (fd < 0) continue;
      // Hello both ways: a port held by something else is not taken for the store.
      set_io_timeout(fd, std::max(0.001, std::min(5.0, timeout_s_ - since(t0))));
      char back[kHelloLen];
      const bool sent = send_all(fd, kHello, kHelloLen);
      const bool answered = sent && recv_all(fd, back, kHelloLen);
      if (answered && std::memcmp(back, kHello, kHelloLen) == 0) {
        sockaddr_storage local{};
        socklen_t len = sizeof(local);
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
        local_address_ = sockaddr_host(local);
        if (local_address_.rfind("::ffff:", 0) == 0) local_address_ = local_address_.substr(7);
        fd_ = fd;
      } else {
        hello_failure = std::max(hello_failure, answered ? 2 : 1);
        ::close(fd);
      }
    }
    if (fd_ >= 0) break;
    if (const int sig = stop_signal_received()) {  // scancel, torchrun's restart: never wait out the timeout
      freeaddrinfo(res);
      if (server_.joinable()) {
        (void)!::write(wake_[1], "x", 1);
        server_.join();
      }
      fail("stopped by ", stop_signal_name(sig), " while connecting to the rendezvous store at ", where_,
           ": nothing was trained");
    }
    if (since(t0) >= timeout_s_) {
      freeaddrinfo(res);
      if (server_.joinable()) {
        (void)!::write(wake_[1], "x", 1);
        server_.join();
      }
      if (hello_failure == 2)
        fail("something at ", where_,
             " answers, but it is not cnnscale's rendezvous store (another program "
             "holds that port?); pick a free MASTER_PORT, the same on every rank");
      if (hello_failure == 1)
        fail("connected to ", where_, " but no rendezvous store answered within ", timeout_s_,
             " s (--collective-timeout): that address is not rank 0's (a proxy or another program accepted the "
             "connection) or rank 0 is stuck. Check MASTER_ADDR/MASTER_PORT, the same on every rank");
      fail("could not reach the rendezvous store at ", where_, " within ", timeout_s_,
           " s (--collective-timeout; last error: ", std::strerror(last_errno),
           "): rank 0 serves it, so rank 0 must be running and that address must name rank 0's host. Check "
           "MASTER_ADDR/MASTER_PORT (the same on every rank), that rank 0 started, and firewalls");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  freeaddrinfo(res);
}

RendezvousStore::~RendezvousStore() {
  if (fd_ >= 0) ::close(fd_);
  if (server_.joinable()) {
    (void)!::write(wake_[1], "x", 1);
    server_.join();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  for (int f : wake_)
    if (f >= 0) ::close(f);
}

void RendezvousStore::serve() {
  struct Conn {
    int fd;
    std::string in;
    bool hello = false;
  };
  std::map<std::string, std::string> kv;
  std::vector<Conn> conns;
  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& c : conns) fds.push_back({c.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents) break;
    if (fds[1].revents & POLLIN) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        set_io_timeout(fd, 10);  // replies are small; a client that stops reading is dropped
        conns.push_back({fd, {}, false});
      }
    }
    std::vector<bool> drop(conns.size(), false);
    for (size_t i = 0; i < conns.size(); ++i) {
      if (!(fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Conn& c = conns[i];
      char buf[65536];
      ssize_t k = ::recv(c.fd, buf, sizeof(buf), 0);
      if (k <= 0) {
        drop[i] = true;
        continue;
      }
      c.in.append(buf, static_cast<size_t>(k));
      // Handle every complete message.
      for (;;) {
        if (!c.hello) {
          if (c.in.size() < kHelloLen) break;
          if (c.in.compare(0, kHelloLen, kHello) != 0 || !send_all(c.fd, kHello, kHelloLen)) {
            drop[i] = true;
            break;
          }
          c.hello = true;
          c.in.erase(0, kHelloLen);
          continue;
        }
        if (c.in.size() < 5) break;
        const char op = c.in[0];
        const uint32_t klen = get_u32(&c.in[1]);
        if (klen > kMaxField) {
          drop[i] = true;
          break;
        }
        size_t need = 5 + klen;
        uint32_t vlen = 0;
        if (op == 's' || op == 'c') {
          if (c.in.size() < need + 4) break;
          vlen = get_u32(&c.in[need]);
          if (vlen > kMaxField) {
            drop[i] = true;
            break;
          }
          need += 4 + vlen;
        }
        if (c.in.size() < need) break;
        const std::string key = c.in.substr(5, klen);
        std::string reply;
        if (op == 's' || op == 'c') {
          std::string value = c.in.substr(5 + klen + 4, vlen);
          const bool absent = kv.find(key) == kv.end();
          if (op == 's' || absent) kv[key] = std::move(value);
          reply.push_back(op == 's' || absent ? 1 : 0);
        } else if (op == 'g') {
          auto it = kv.find(key);
          reply.push_back(it != kv.end() ? 1 : 0);
          if (it != kv.end()) {
            put_u32(reply, static_cast<uint32_t>(it->second.size()));
            reply += it->second;
          }
        } else {
          drop[i] = true;
          break;
        }
        c.in.erase(0, need);
        if (!send_all(c.fd, reply.data(), reply.size())) {
          drop[i] = true;
          break;
        }
      }
    }
    for (size_t i = conns.size(); i-- > 0;)
      if (drop[i]) {
        ::close(conns[i].fd);
        conns.erase(conns.begin() + static_cast<long>(i));
      }
  }
  for (auto& c : conns) ::close(c.fd);
}

std::string RendezvousStore::request(char op, const std::string& key, const std::string* value, bool* status) {
  std::string msg(1, op);
  put_u32(msg, static_cast<uint32_t>(key.size()));
  msg += key;
  if (value) {
    put_u32(msg, static_cast<uint32_t>(value->size()));
    msg += *value;
  }
  std::lock_guard<std::mutex> lock(mu_);
  set_io_timeout(fd_, timeout_s_);
  char st = 0;
  std::string out;
  errno = 0;
  bool ok = send_all(fd_, msg.data(), msg.size()) && recv_all(fd_, &st, 1);
  if (ok && op == 'g' && st == 1) {
    char len[4];
    ok = recv_all(fd_, len, 4);
    if (ok) {
      out.resize(get_u32(len));
      ok = recv_all(fd_, out.data(), out.size());
    }
  }
  if (!ok)
    fail("lost the rendezvous store at ", where_, " (",
         errno == EAGAIN || errno == EWOULDBLOCK ? "no answer within --collective-timeout" : "connection closed",
         "): rank 0, which serves it, stopped (its output names the cause, e.g. a rank that did not join) or the "
         "network failed");
  *status = st == 1;
  return out;
}

void RendezvousStore::set(const std::string& key, const std::string& value) {
  bool st = false;
  request('s', key, &value, &st);
}

bool RendezvousStore::create(const std::string& key, const std::string& value) {
  bool st = false;
  request('c', key, &value, &st);
  return st;
}

bool RendezvousStore::try_get(const std::string& key, std::string* value) {
  bool st = false;
  std::string v = request('g', key, nullptr, &st);
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
    std::vector<std::string> still;
    for (const auto& k : missing)
      if (!try_get(k, nullptr)) still.push_back(k);
    missing.swap(still);
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
           std::chrono::duration<double>(timeout).count(), " s: a rank stopped during the rendezvous");
    stop_if_signalled();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return v;
}

}  // namespace cnnscale
