// test_watchdog_local.cpp — Watchdog::start_local, the watchdog of ranks that met through
// a rendezvous store (no MPI channel to the others): a wait on another channel (an NCCL
// wait inside ControlComm::waiting) that outlasts the timeout ends this process with
// status 3 and the watchdog's message; waits that end in time, and stop(), do not.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "comm/watchdog.hpp"

using namespace cnnscale;

TEST(WatchdogLocal, AWaitPastTheTimeoutEndsTheProcessWithTheMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog w;
        if (!w.start_local(2, 0.3, "node7")) std::_Exit(10);
        w.set_step(41);
        Watchdog::Scope waiting(w, "the gradient allreduce (NCCL)");
        std::this_thread::sleep_for(std::chrono::seconds(20));
        std::_Exit(11);  // not reached when the watchdog fires
      },
      ::testing::ExitedWithCode(3),
      "cnnscale: error: rank 2 on node7 waited [0-9]+ s in the gradient allreduce \\(NCCL\\) at step 41 "
      "\\(--collective-timeout 0\\): a peer stopped.*rendezvous store");
}

TEST(WatchdogLocal, WaitsWithinTheTimeoutAndStopDoNotFire) {
  Watchdog w;
  ASSERT_TRUE(w.start_local(0, 0.3, "node0"));
  for (int i = 0; i < 5; ++i) {  // 5 waits of 0.1 s each: 0.5 s in all, none past 0.3 s
    Watchdog::Scope waiting(w, "a short wait");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // idle longer than the timeout
  const auto t0 = std::chrono::steady_clock::now();
  w.stop();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.0);
  Watchdog off;
  EXPECT_FALSE(off.start_local(0, 0, "node0")) << "timeout 0 means no watchdog";
}
