// rendezvous_token.hpp — the secret the ranks of one job prove to the rendezvous store
// (issue 26 item 6). PyTorch's TCPStore accepts anyone who reaches its port; ours
// accepts only a client that proves it holds the job's token, and each client checks
// the store proves it too (a fake store on the port is refused as well).
//
// Where the token comes from, in this order:
//   1. CNNSCALE_RENDEZVOUS_TOKEN in the environment (every rank the same; ≥ 16 bytes);
//   2. a token file RUN_DIR/.rendezvous-token (train with --run-dir): rank 0 writes 32
//      random bytes (hex) there with mode 0600 before it serves, every other rank reads
//      it, so the run directory must be on a file system every node shares (it already
//      must be, for resume); rank 0 removes the file when the store closes;
//   3. neither: the store trusts whoever reaches its port (docs/launch.md says so).
// The token never crosses the network: the handshake is a challenge-response with
// HMAC-SHA256 (OpenSSL's libcrypto) over both sides' random nonces.
#pragma once
#include <array>
#include <optional>
#include <string>

namespace cnnscale {

constexpr size_t kNonceBytes = 32;
using Nonce = std::array<unsigned char, kNonceBytes>;
using Mac = std::array<unsigned char, 32>;

// Cryptographically random bytes (OpenSSL RAND_bytes); UserError if the system has none.
Nonce random_nonce();

// HMAC-SHA256(token, label || a || b).
Mac rendezvous_mac(const std::string& token, const char* label, const Nonce& a, const Nonce& b);

// Constant-time comparison.
bool same_mac(const Mac& x, const Mac& y);

// CNNSCALE_RENDEZVOUS_TOKEN, checked (≥ 16 bytes, no more than 4096); nullopt when unset.
std::optional<std::string> token_from_env();

// The token file for a run directory ("" for none).
std::string token_file_for_run_dir(const std::string& run_dir);

// Rank 0: a fresh random token written to `path` (mode 0600, written to a temporary
// file — util/atomic_file.hpp create_temporary: a random name, O_EXCL | O_NOFOLLOW —
// and renamed, the directory created if missing); returns the token. UserError
// naming the path when it cannot be written.
std::string write_token_file(const std::string& path);

// Any rank: the token in `path`; nullopt while it does not exist. UserError when it
// exists but cannot be read or is malformed.
std::optional<std::string> read_token_file(const std::string& path);

}  // namespace cnnscale
