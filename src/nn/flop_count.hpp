// flop_count.hpp — the FLOPs of one training step per sample, the figure the
// benchmarks divide by time (docs/models.md): 2 FLOPs per multiply-add of every conv
// and linear layer, in forward, backward-data (skipped for the first layer, whose
// input needs no gradient) and backward-weights; element-wise work is not counted.
#pragma once
#include "nn/graph.hpp"

namespace cnnscale::nn {

double train_flops_per_sample(const Graph& g);

}  // namespace cnnscale::nn
