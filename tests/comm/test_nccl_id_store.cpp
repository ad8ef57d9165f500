// test_nccl_id_store.cpp — the ncclUniqueId through the rendezvous store (ranks that share
// no MPI job): 3 processes (fork) meet at a store on loopback; every rank gets rank 0's
// id bytes (ncclGetUniqueId needs no GPU), twice in a row (the second communicator's key
// is another, and its id another). CUDA build only; no GPU needed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "comm/nccl.hpp"
#include "common/free_port.hpp"
#include "launch/rendezvous_store.hpp"

using namespace cnnscale;
using cnnscale::test::free_port;

namespace {

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string read_all(int fd) {
  std::string out;
  char buf[512];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

// One rank: both ids, written to `fd`; rank 0 keeps the store up until every rank is done.
int run_rank(int rank, int size, int port, int fd) {
  try {
    RendezvousStore store("127.0.0.1", port, rank == 0, 30, "test");
    const std::string a = nccl_unique_id_via_store(store, rank, 30);
    const std::string b = nccl_unique_id_via_store(store, rank, 30);
    if (!write_all(fd, a + b)) return 2;
    store.set("test/done/" + std::to_string(rank), "1");
    if (rank == 0) {
      std::vector<std::string> keys;
      for (int r = 0; r < size; ++r) keys.push_back("test/done/" + std::to_string(r));
      if (!store.wait(keys, std::chrono::seconds(30)).empty()) return 3;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    return 4;
  }
}

}  // namespace

TEST(NcclIdStore, EveryRankGetsRankZerosId) {
  const int size = 3, port = free_port();
  std::vector<int> fds, pids;
  for (int r = 0; r < size; ++r) {
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(p[0]);
      const int rc = run_rank(r, size, port, p[1]);
      close(p[1]);
      _exit(rc);
    }
    close(p[1]);
    fds.push_back(p[0]);
    pids.push_back(pid);
  }
  std::vector<std::string> got;
  for (int r = 0; r < size; ++r) {
    got.push_back(read_all(fds[static_cast<size_t>(r)]));
    close(fds[static_cast<size_t>(r)]);
  }
  for (int r = 0; r < size; ++r) {
    int st = 0;
    ASSERT_EQ(waitpid(pids[static_cast<size_t>(r)], &st, 0), pids[static_cast<size_t>(r)]);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "rank " << r << " status " << st;
  }
  ASSERT_EQ(got[0].size() % 2, 0u);
  const size_t n = got[0].size() / 2;
  ASSERT_GT(n, 0u);
  const std::string first = got[0].substr(0, n), second = got[0].substr(n);
  EXPECT_NE(first, std::string(n, '\0')) << "rank 0's id is all zero";
  EXPECT_NE(first, second) << "the second communicator reused the first id";
  for (int r = 1; r < size; ++r) EXPECT_EQ(got[static_cast<size_t>(r)], got[0]) << "rank " << r;
}
