// cuda_optimizer.hpp — the optimisers of optimizer.hpp (same options, same PyTorch
// semantics, same state names) updating DEVICE flat buffers with CUDA kernels, on a
// given stream (pass the device model's Model::stream(): the update is then ordered
// after the model's backward and before its next forward without any host wait).
// make_optimizer(options, model) picks it for a device model.
//
// step(params, grads, lr) takes device pointers and only enqueues the update.
// The arithmetic is the CPU optimiser's, operation by operation, with
// round-to-nearest intrinsics (no fused multiply-add), so that it agrees with the CPU
// optimiser to the last bit where the host compiler does not contract either.
//
// state(): host copies to write (resume, broadcast). The call waits for the stream,
// copies the device state into host vectors and returns them; those vectors are then
// THE state until commit_state() or the next step() copies them back to the device.
// state_view(): the same copies to read (a checkpoint being written); the device copy
// stays the state, so the next step() neither uploads nor waits (a wait there would sit
// behind the step's NCCL sums, outside the watchdog). The copies cost one device↔host
// transfer per call (checkpoint/resume time only).
//
// In a build without CUDA make_cuda_optimizer is a UserError (src/train/cuda/stub).
#pragma once
#include <memory>
#include <vector>

#include "train/optimizer.hpp"

namespace cnnscale {

// Throws the same UserErrors as make_optimizer for bad options.
std::unique_ptr<Optimizer> make_cuda_optimizer(const OptimizerOptions& o, const std::vector<ParamInfo>& params,
                                               size_t param_count, void* stream);

}  // namespace cnnscale
