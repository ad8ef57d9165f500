// The verifiable pattern: sums are exact, and a single wrong element is counted.
#include <gtest/gtest.h>

#include <vector>

#include "comm/allreduce_bench.hpp"
#include "comm/allreduce_check.hpp"
#include "util/bf16.hpp"
#include "util/error.hpp"

using namespace cnnscale;

TEST(AllreduceCheck, SummedPatternsVerifyAndCorruptionIsCounted) {
  for (DType t : {DType::f32, DType::bf16}) {
    const int world = 5;
    const size_t n = 1000;
    std::vector<float> acc(n, 0.f);
    std::vector<char> buf(n * dtype_size(t));
    for (int r = 0; r < world; ++r) {
      fill_pattern(buf.data(), n, t, r);
      for (size_t i = 0; i < n; ++i)
        acc[i] += t == DType::f32 ? reinterpret_cast<float*>(buf.data())[i]
                                  : bf16_to_float(reinterpret_cast<uint16_t*>(buf.data())[i]);
    }
    for (size_t i = 0; i < n; ++i) {
      if (t == DType::f32) reinterpret_cast<float*>(buf.data())[i] = acc[i];
      else reinterpret_cast<uint16_t*>(buf.data())[i] = float_to_bf16(acc[i]);
    }
    EXPECT_EQ(count_wrong(buf.data(), n, t, world), 0u);
    if (t == DType::f32) reinterpret_cast<float*>(buf.data())[17] += 1.f;
    else reinterpret_cast<uint16_t*>(buf.data())[17] ^= 0x0080;
    EXPECT_EQ(count_wrong(buf.data(), n, t, world), 1u);
    EXPECT_GT(count_wrong(buf.data(), n, t, world + 1), n / 3);  // wrong world size: most differ
  }
}

TEST(AllreduceCheck, PatternIsNotConstant) {
  // A constant pattern would hide misplaced elements; make sure neighbours differ.
  for (DType t : {DType::f32, DType::bf16}) EXPECT_NE(pattern_value(0, 0, t), pattern_value(1, 0, t));
}

TEST(AllreduceBench, SweepAndBusFactor) {
  AllreduceBenchOptions o;
  o.min_bytes = 8;
  o.max_bytes = 64;
  o.factor = 2;
  EXPECT_EQ(sweep_sizes(o), (std::vector<size_t>{8, 16, 32, 64}));
  o.dtype = DType::bf16;
  o.min_bytes = 1;
  o.max_bytes = 4;
  EXPECT_EQ(sweep_sizes(o), (std::vector<size_t>{2, 4}));
  EXPECT_DOUBLE_EQ(bus_factor(1), 0.0);
  EXPECT_DOUBLE_EQ(bus_factor(2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(4), 1.5);
  EXPECT_EQ(parse_size("-e", "128M"), 128u << 20);
  EXPECT_EQ(parse_size("-e", "64K"), 64u << 10);
  EXPECT_EQ(parse_size("-b", "8"), 8u);
  EXPECT_THROW(parse_size("-e", "lots"), UserError);
  EXPECT_THROW(parse_size("-e", "12Q"), UserError);
}
