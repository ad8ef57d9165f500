// The rendezvous store (launch/rendezvous_store.hpp) in one process: a server and
// clients over loopback; set/get/create/wait, and the errors that replace a hang.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "common/user_error.hpp"
#include "common/free_port.hpp"
#include "launch/rendezvous_store.hpp"
#include "util/error.hpp"

using namespace cnnscale;
using cnnscale::test::free_port;
using namespace std::chrono_literals;
using cnnscale::test::user_error_of;

TEST(RendezvousStore, SetGetCreateWaitBetweenClients) {
  const int port = free_port();
  RendezvousStore server("127.0.0.1", port, true, 5, "test");
  RendezvousStore client("127.0.0.1", port, false, 5, "test");
  EXPECT_EQ(client.local_address(), "127.0.0.1");
  std::string v;
  EXPECT_FALSE(client.try_get("k", &v));
  server.set("k", std::string("a\0b", 3));  // values are bytes
  ASSERT_TRUE(client.try_get("k", &v));
  EXPECT_EQ(v, std::string("a\0b", 3));
  EXPECT_TRUE(client.create("once", "1"));
  EXPECT_FALSE(server.create("once", "2"));
  EXPECT_EQ(server.get("once", 1s), "1");
  // wait() returns when another client sets the key later; the missing ones otherwise.
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    server.set("late", "x");
  });
  EXPECT_TRUE(client.wait({"k", "late"}, 3s).empty());
  later.join();
  const auto missing = client.wait({"k", "never"}, 50ms);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0], "never");
  EXPECT_NE(user_error_of([&] { client.get("never", 50ms); }).find("did not appear"), std::string::npos);
}

TEST(RendezvousStore, LargeValue) {
  const int port = free_port();
  RendezvousStore server("127.0.0.1", port, true, 5, "test");
  std::string big(3 << 20, 'z');
  big[12345] = 'q';
  server.set("big", big);
  RendezvousStore client("127.0.0.1", port, false, 5, "test");
  EXPECT_EQ(client.get("big", 1s), big);
}

TEST(RendezvousStore, NoServerIsAnErrorWithinTheTimeout) {
  const int port = free_port();
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e =
      user_error_of([&] { RendezvousStore("127.0.0.1", port, false, 0.5, "MASTER_ADDR/MASTER_PORT"); });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_NE(e.find("could not reach the rendezvous store at 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << e;
}

TEST(RendezvousStore, PortInUseAndForeignListener) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  const int port = ntohs(sa.sin_port);
  const std::string e = user_error_of([&] { RendezvousStore("127.0.0.1", port, true, 1, "test"); });
  EXPECT_NE(e.find("is already in use on this host"), std::string::npos) << e;
  // A client meets the foreign listener, which never answers the hello.
  const std::string f = user_error_of([&] { RendezvousStore("127.0.0.1", port, false, 0.5, "test"); });
  EXPECT_NE(f.find("no rendezvous store answered"), std::string::npos) << f;
  close(fd);
}

TEST(RendezvousStore, UnresolvableHost) {
  const std::string e = user_error_of([&] { RendezvousStore("no-such-host.invalid", 29500, false, 1, "test"); });
  EXPECT_NE(e.find("does not resolve"), std::string::npos) << e;
}

TEST(RendezvousStore, LostServer) {
  const int port = free_port();
  auto server = std::make_unique<RendezvousStore>("127.0.0.1", port, true, 5, "test");
  RendezvousStore client("127.0.0.1", port, false, 5, "test");
  client.set("a", "1");
  server.reset();
  const std::string e = user_error_of([&] { client.set("b", "2"); });
  EXPECT_NE(e.find("lost the rendezvous store"), std::string::npos) << e;
}
