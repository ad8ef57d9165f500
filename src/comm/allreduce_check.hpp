// allreduce_check.hpp — verifiable allreduce inputs in the manner of nccl-tests:
// every rank fills a pattern whose sum over ranks is exactly representable (small
// integers: < 2^24 for float, < 2^8 for bfloat16), so any wrong element is a bug.
#pragma once
#include <cstddef>
#include <cstdint>

#include "comm/communicator.hpp"

namespace cnnscale {

// Value rank r puts at index i.
float pattern_value(size_t i, int rank, DType t);
// Exact expected sum over ranks 0..world-1 at index i.
float expected_sum(size_t i, int world, DType t);

// Fills a host buffer (float or uint16 bf16 storage) with rank's pattern.
void fill_pattern(void* host, size_t count, DType t, int rank);
// Counts elements of host that differ from expected_sum.
size_t count_wrong(const void* host, size_t count, DType t, int world);

}  // namespace cnnscale
