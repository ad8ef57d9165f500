// cuda_model.hpp — the GPU model: the Graph of the CPU model (nn::build_model_graph,
// nn/graph.hpp) run with cuDNN (conv, pooling, ReLU, batch-norm), cuBLAS (linear,
// residual add) and a few small CUDA kernels (softmax cross-entropy, dropout, a
// counter), one layer file per op in src/nn/cuda/. Usable from non-CUDA code: no CUDA
// header is included; streams travel as void*. make_model(..., device >= 0) builds it;
// in a build without CUDA that is a UserError.
//
// Contract (in addition to model.hpp):
// - param_data() / grad_data() are DEVICE pointers (on_device() is true); use
//   copy_params_to_host / copy_params_from_host for host copies (checkpoints, comparisons).
// - forward_backward / forward_eval take HOST images, labels and sample ids. Without a
//   live ticket they are copied through one pinned buffer on the model's stream. With
//   StepContext::staged = a ticket from stage() (called in the data pipeline's thread,
//   which does the memcpy into one of up to 8 pinned host slots), the batch is copied
//   from that slot into one of two device input slots on a separate copy stream, which
//   waits (device-side) for the backward of the step that last read that device slot;
//   the model's stream waits for the copy. So the copy of step k+1 overlaps step k's
//   backward, and the training thread copies nothing. Same bytes, same results.
//   The owner of a hook calling stage() removes it before destroying the model.
// - All work is enqueued on the model's stream (stream()). forward_backward returns
//   once the loss is known (after the forward pass); backward may still be running.
//   The loss wait polls (cudaEventQuery, yield, then 50 us sleeps), never blocks in CUDA,
//   and calls StepContext::while_waiting between polls (the communicator's asynchronous
//   error check: the stream may be waiting for NCCL's, wait_for).
// - mark / marked_seconds (model.hpp): timing CUDA events on the stream, created on first
//   use and reused; read without a wait once the stream has passed them.
// - GradReadyFn(ready_end) is called on the host right AFTER the gradients below
//   ready_end have been ENQUEUED, not finished. Before another stream reads them (the
//   NCCL communicator's), call order_before(that_stream) from the callback: it records
//   an event on the model's stream and makes that stream wait for it (no host wait).
// - Work enqueued on the model's stream by others (the CUDA optimizer built with
//   stream()) is ordered with the model's own work. A reader on another stream after
//   step end must call order_before or synchronize().
// - fp32 data. TF32 tensor-core math unless ModelOptions::tf32 is false (then cuDNN
//   CUDNN_FMA_MATH and cuBLAS CUBLAS_DEFAULT_MATH: results agree with the CPU model to
//   fp32 rounding). prepare(n, Precision::bf16): convolutions on bf16 NHWC copies and
//   matmuls on bf16 copies, fp32 accumulation, everything else fp32 (docs/gpu.md, "bf16
//   on the GPU"); a UserError on GPUs before compute capability 8.0. Changing the
//   precision in a later prepare() replans.
// - Parameters are initialised on the host by the CPU model's init (nn::init_param:
//   bit-identical to the CPU model for the same seed) and uploaded.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "nn/model.hpp"

namespace cnnscale {

class DeviceModel : public Model {
 public:
  bool on_device() const override { return true; }
  virtual int device() const = 0;
  void* stream() const override = 0;                   // the model's cudaStream_t
  void order_before(void* other_stream) override = 0;  // other_stream waits for work enqueued so far
  void wait_for(void* other_stream) override = 0;      // the model's stream waits for other_stream's work so far
  void synchronize() override = 0;                     // host waits for the model's stream
  void copy_params_to_host(float* host) override = 0;  // param_count() floats; synchronous
  void copy_params_from_host(const float* host) override = 0;
  virtual void download_grads(float* host) = 0;
  virtual int64_t staged_steps() const = 0;  // forward_backward calls that used a staged ticket
};

// Builds the GPU model on CUDA device `device` (built-in name or spec, as make_model;
// same UserErrors). Throws UserError when the device cannot be used, or when this
// build has no CUDA (src/nn/cuda/stub).
std::unique_ptr<DeviceModel> make_cuda_model(const std::string& name_or_spec, const SampleShape& input, int classes,
                                             int device, const ModelOptions& options = {});

}  // namespace cnnscale
