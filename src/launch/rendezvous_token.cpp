// rendezvous_token.cpp — see rendezvous_token.hpp.
#include "launch/rendezvous_token.hpp"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/atomic_file.hpp"
#include "util/env.hpp"
#include "util/error.hpp"

namespace cnnscale {

Nonce random_nonce() {
  Nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1)
    fail("the system gave no random bytes for the rendezvous handshake (OpenSSL RAND_bytes failed)");
  return n;
}

Mac rendezvous_mac(const std::string& token, const char* label, const Nonce& a, const Nonce& b) {
  std::string msg(label);
  msg.append(reinterpret_cast<const char*>(a.data()), a.size());
  msg.append(reinterpret_cast<const char*>(b.data()), b.size());
  Mac out{};
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()), reinterpret_cast<const unsigned char*>(msg.data()),
            msg.size(), out.data(), &len) ||
      len != out.size())
    fail("HMAC-SHA256 failed in OpenSSL (the rendezvous handshake cannot be computed)");
  return out;
}

bool same_mac(const Mac& x, const Mac& y) { return CRYPTO_memcmp(x.data(), y.data(), x.size()) == 0; }

std::optional<std::string> token_from_env() {
  auto t = process_env()("CNNSCALE_RENDEZVOUS_TOKEN");
  if (!t) return std::nullopt;
  if (t->size() < 16)
    fail("CNNSCALE_RENDEZVOUS_TOKEN has ", t->size(),
         " bytes; a token must be at least 16 bytes so that it cannot be guessed (e.g. "
         "export CNNSCALE_RENDEZVOUS_TOKEN=$(openssl rand -hex 32), the same on every rank)");
  if (t->size() > 4096) fail("CNNSCALE_RENDEZVOUS_TOKEN has ", t->size(), " bytes; at most 4096 are allowed");
  return t;
}

std::string token_file_for_run_dir(const std::string& run_dir) {
  return run_dir.empty() ? std::string() : run_dir + "/.rendezvous-token";
}

std::string write_token_file(const std::string& path) {
  const Nonce n = random_nonce();
  static const char* hex = "0123456789abcdef";
  std::string token;
  for (unsigned char c : n) {
    token.push_back(hex[c >> 4]);
    token.push_back(hex[c & 15]);
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  if (ec)
    fail("rank 0 cannot create the run directory ", p.parent_path().string(), " for the rendezvous token: ",
         ec.message(), "; choose a --run-dir this user can write");
  // A random temporary name, O_EXCL | O_NOFOLLOW (util/atomic_file.hpp; issue 48).
  std::string tmp;
  const int fd = create_temporary(path, 0600, &tmp);
  if (fd < 0)
    fail("rank 0 cannot write the rendezvous token file ", tmp, ": ", std::strerror(errno),
         "; choose a --run-dir this user can write, or set CNNSCALE_RENDEZVOUS_TOKEN on every rank");
  const std::string body = token + "\n";
  const bool ok = ::write(fd, body.data(), body.size()) == static_cast<ssize_t>(body.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    fail("rank 0 cannot write the rendezvous token file ", path, ": ", std::strerror(e),
         "; free space there, or set CNNSCALE_RENDEZVOUS_TOKEN on every rank");
  }
  return token;
}

std::optional<std::string> read_token_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    fail("cannot read the rendezvous token file ", path, ": ", std::strerror(errno),
         " (rank 0 writes it with mode 0600: every rank must run as the same user; or set "
         "CNNSCALE_RENDEZVOUS_TOKEN on every rank)");
  }
  char buf[4200];
  const ssize_t k = ::read(fd, buf, sizeof(buf));
  ::close(fd);
  if (k < 0) fail("cannot read the rendezvous token file ", path, ": ", std::strerror(errno));
  std::string t(buf, static_cast<size_t>(k));
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r')) t.pop_back();
  if (t.size() < 16) return std::nullopt;  // being written (rename makes this rare) or truncated: read again
  return t;
}

}  // namespace cnnscale
