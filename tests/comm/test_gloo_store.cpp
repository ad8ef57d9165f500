// test_gloo_store.cpp — what Gloo's connection setup leaves in the rendezvous store
// (comm/gloo_communicator.cpp): 16 ranks in threads of this process meet at a store on
// loopback, connect a data and a control context as training does, and sum. Gloo's
// address list of a rank is 136 bytes per peer (a sockaddr_storage and a sequence
// number); the store holds it compacted (one address, then 2 bytes per further peer),
// so a world of W holds ~4·W² bytes of them, not ~272·W² (issue 39 item 1).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "comm/gloo_communicator.hpp"
#include "common/free_port.hpp"
#include "launch/rendezvous_store.hpp"

using namespace cnnscale;
using cnnscale::test::free_port;

namespace {

StoreOptions store_at(int port, bool serve, int world) {
  StoreOptions o;
  o.addr = "127.0.0.1";
  o.port = port;
  o.serve = serve;
  o.timeout_s = 60;
  o.what = "test";
  o.world_size = world;
  return o;
}

TEST(GlooStore, AddressListsAreCompactAndTheContextsSum) {
  constexpr int W = 16;
  const int port = free_port();
  RendezvousStore server(store_at(port, true, W));
  std::vector<float> sums(W, 0.0f);
  std::vector<std::string> errors(W);
  std::vector<std::thread> ranks;
  for (int r = 0; r < W; ++r)
    ranks.emplace_back([&, r] {
      try {
        RendezvousStore store(store_at(port, false, W));
        auto data = make_gloo_communicator(make_gloo_context(store, "data", r, W, 60), 60);
        auto control = make_gloo_control(make_gloo_context(store, "control", r, W, 60), 60);
        float x = static_cast<float>(r + 1);
        data->allreduce_sum(&x, 1, DType::f32);
        int y = r;
        control->allreduce(&y, 1, 'i', ReduceOp::max, "a test max");
        sums[static_cast<size_t>(r)] = x + static_cast<float>(y);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  for (int r = 0; r < W; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
    EXPECT_EQ(sums[static_cast<size_t>(r)], W * (W + 1) / 2 + (W - 1)) << "rank " << r;
  }
  // Per rank and context: its address list (compact: ~150 + 2·W bytes) and Gloo's
  // hostname key, with their keys. Raw lists alone would be 2·W·(W-1)·136 = 65280 bytes.
  const RendezvousStore::Held held = server.held();
  EXPECT_EQ(held.keys, size_t{4} * W);
  EXPECT_LE(held.bytes, size_t{2} * W * (320 + 2 * W)) << held.bytes << " bytes in " << held.keys << " keys";
}

}  // namespace
