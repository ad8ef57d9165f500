// exec.hpp — the runtime side of a layer: activation tensors (oneDNN memories over
// buffers owned by a Plan), the Exec interface (forward/backward of one node for one
// batch size), and small helpers shared by the layer files: aligned buffers,
// allocation-free primitive execution, and layout conversion.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "nn/graph.hpp"
#include "nn/model.hpp"

namespace cnnscale::nn {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;
using md_t = dnnl::memory::desc;

// 64-byte aligned, zero-initialised byte buffer.
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) { resize(bytes); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& o) noexcept : p_(o.p_), n_(o.n_), owned_(o.owned_) { o.p_ = nullptr, o.n_ = 0, o.owned_ = true; }
  ~Buffer();
  void resize(size_t bytes);  // discards contents, zero-fills
  void adopt(void* p, size_t bytes);  // uses caller-owned memory from now on (not freed here)
  // Returns the whole pages inside an owned buffer to the OS (madvise DONTNEED): they
  // read as zero on next use. Keeps the allocation (same address and size).
  void release_pages();
  void* data() const { return p_; }
  float* f() const { return static_cast<float*>(p_); }
  size_t bytes() const { return n_; }
  // Bytes currently owned by all Buffers of the process (for the plan's accounting).
  static size_t owned_total();

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
  bool owned_ = true;
};

// Arguments of one primitive call, built once; run() makes no allocation.
struct Call {
  dnnl::primitive prim;
  std::vector<dnnl_exec_arg_t> args;
  std::vector<dnnl::memory> keep;  // keeps the memories alive
  bool valid = false;
  void set(dnnl::primitive p) { prim = std::move(p), valid = true; }
  void arg(int key, const dnnl::memory& m) {
    keep.push_back(m);
    args.push_back({key, m.get()});
  }
  void run(const dnnl::stream& s) const;
};

// An activation: data and gradient, both in layout `md` (chosen by the producer).
// The bytes live in the tensor's own buffers, in another tensor's (an in-place layer, a
// fused conv+relu, a flatten view), or, for gradients and scratch, in the plan's
// gradient arena: Net assigns each gradient an arena slot by backward liveness before
// the execs are built (net.cpp, plan_gradients) and sets diff_slot / scratch_slot.
struct Tensor {
  std::vector<int64_t> dims;   // logical, with the batch: {n,c,h,w} or {n,f}
  md_t md;
  Buffer data, diff, scratch;  // owned bytes (empty when they live elsewhere, see above)
  dnnl::memory mem, diff_mem, scratch_mem;
  int consumers = 0;           // nodes reading it (diffs from several are summed)
  int last_consumer = -1;      // node index of the last reader in forward order: it is
                               // the first to run backward and writes `diff` directly
  bool needs_diff = true;      // false for the network input
  // Arena slots for the gradient and the scratch (nullptr: own buffer); used when the
  // chosen layout fits in the slot's bytes, else the tensor falls back to its own buffer.
  void* diff_slot = nullptr;
  size_t diff_slot_bytes = 0;
  void* scratch_slot = nullptr;
  size_t scratch_slot_bytes = 0;

  // Sets md and the data and diff memories; data_alias: use that buffer as data instead
  // (fused conv, in-place relu/add); diff_alias: use that buffer as diff instead (same
  // layers, flatten of a plain tensor: a view).
  void alloc(const md_t& m, const dnnl::engine& eng, void* data_alias = nullptr, void* diff_alias = nullptr);
  float* data_ptr() const { return data_ptr_; }
  float* diff_ptr() const { return diff_ptr_; }
  // Where consumer `node` writes its contribution to this tensor's gradient; after
  // the primitive ran, diff_done(node) sums it in when another consumer wrote first.
  const dnnl::memory& diff_target(int node) const { return node == last_consumer ? diff_mem : scratch_mem; }
  float* diff_target_ptr(int node) const { return node == last_consumer ? diff_ptr_ : scratch_ptr_; }
  void diff_done(int node);

 private:
  float* data_ptr_ = nullptr;
  float* diff_ptr_ = nullptr;
  float* scratch_ptr_ = nullptr;
};

// The plain (PyTorch) layout of a tensor with these dims.
md_t plain_md(const std::vector<int64_t>& dims, dt type = dt::f32);

// A convolution's bias gradient: out[c] = sum of `m` (N×C×spatial, f32 or bf16) over all
// but dim 1: each row of the innermost spatial dim summed in float per channel, the rows
// in double, in a fixed order (the same bits every run). Why not oneDNN 2.6's, inside its
// backward-weights: it sums in float, and came out further from float64 than torch fp32's
// (tests/nn/grad_torch.sh, worst relative error per model, oneDNN's → this: spec A 4.0e-4 →
// 2.1e-4, torch 2.9e-4 / 1.1e-4 in the same runs; mnist_cnn's conv1.bias was its worst
// tensor at 2.2e-6, now conv1.weight at 1.1e-6); the time is a wash (mnist_cnn's conv1
// backward-weights 3.25 → 2.6 ms without the bias, this sum ~0.7 ms; AMD EPYC, AVX2).
// Layouts: plain (any strides) or blocked on channels only (nChw8c, nChw16c); false for
// any other, where the caller keeps oneDNN's bias.
bool channel_sums_supported(const md_t& md);
// Channels per block of a dense 4-d f32 layout: 1 (plain NCHW), 8 or 16 (nChw8c, nChw16c);
// 0 for any other (the depthwise weight gradient's kernels, channel_layer_md).
int channel_block(const md_t& md);
// The layout of a per-channel layer (SE's mul, layer scale, channel LayerNorm) on x: x's own when it is dense f32
// nChw8c/nChw16c whose block divides the channels (no padded channels: the block's lanes
// are channels cb·B … cb·B + B − 1 of one pixel), else plain NCHW; *block gets B (1: plain).
md_t channel_layer_md(const Tensor& x, int* block);
// `acc`: the caller's scratch (kept between steps: no allocation per call).
void channel_sums(const dnnl::memory& m, float* out, std::vector<double>& acc);

// The weight gradient of a depthwise convolution (groups = channels, k×k, stride, symmetric
// padding pad) from its forward's src and its diff_dst, f32 in plain NCHW or nChw8c/nChw16c
// (both in one of them: _supported says), written to dw in PyTorch's C × 1 × k × k; summed per
// output row in float, the rows in double (conv_depthwise.cpp says why it exists). `acc`:
// the caller's scratch.
bool depthwise_backward_weights_supported(const md_t& src, const md_t& diff_dst);
void depthwise_backward_weights(const dnnl::memory& src, const dnnl::memory& diff_dst, int k, int stride, int pad,
                                float* dw, std::vector<double>& acc);

struct Transients;

// Converts between a memory and another layout/type; a no-op (same memory) when equal.
// With a Transients (below) the converted bytes get no buffer of their own: the plan
// places them in its region of node-local conversions once every exec is built.
struct Convert {
  dnnl::memory out;   // the converted view (== input memory when no conversion)
  Buffer buf;
  Call call;
  size_t transient_bytes = 0;  // > 0: the bytes of `out` are in the plan's transient region
  // Sets up conversion of `from` into layout `want`.
  void init(const dnnl::memory& from, const md_t& want, const dnnl::engine& eng, Transients* t = nullptr);
  // Sets up conversion from a buffer in layout `have` (allocated here) into `to`.
  void init_into(const md_t& have, const dnnl::memory& to, const dnnl::engine& eng, Transients* t = nullptr);
  void run(const dnnl::stream& s) const {
    if (call.valid) call.run(s);
  }

 private:
  void place(const md_t& m, const dnnl::engine& eng, Transients* t);
};

// Conversions whose result is read only while their own node's forward, or its backward,
// runs (weights in a primitive's layout, a bf16 copy of an output gradient, a gradient
// in the primitive's layout before it goes to the input's): nodes run one at a time, so
// one region, as large as the node needing the most, holds them all (Net::build_plan).
struct Transients {
  int node = -1;                               // the node whose exec is being built
  std::vector<std::pair<int, Convert*>> uses;  // (node, conversion)
};

struct RunCtx {
  const dnnl::stream* stream = nullptr;
  const StepContext* step = nullptr;
  int64_t n = 0;
  bool training = true;
};

struct ExecEnv {
  dnnl::engine eng;
  int64_t n = 0;
  Precision precision = Precision::fp32;
  float* params = nullptr;
  float* grads = nullptr;
  const Graph* graph = nullptr;
  Transients* transients = nullptr;  // where node-local conversions go (nullptr: own buffers)
};

class Exec {
 public:
  virtual ~Exec() = default;
  virtual void forward(const RunCtx& c) = 0;      // training forward (ctx.training)
  virtual void forward_eval(const RunCtx& c) { forward(c); }
  // Backward in two halves so that the gradient-ready callback can run between them:
  // parameter gradients first (final after this call), then the input gradient.
  virtual void backward_params(const RunCtx&) {}
  virtual void backward_data(const RunCtx& c) = 0;
  // After a training forward: true when this layer saw a NaN or Inf in its input that it
  // can tell without another pass (batch-norm: its batch statistics are not finite).
  virtual bool saw_non_finite() const { return false; }
};

// A layer that is one primitive forward and (when its input needs a gradient) one
// primitive backward over its single input: flatten, relu, pooling. The constructor of
// the subclass sets fwd_ and, where wanted, bwd_.
class PrimitiveExec : public Exec {
 public:
  PrimitiveExec(const Node& node, Tensor* in) : node_(node), in_(in) {}
  void forward(const RunCtx& c) override {
    if (fwd_.valid) fwd_.run(*c.stream);
  }
  void backward_data(const RunCtx& c) override {
    if (!bwd_.valid) return;
    bwd_.run(*c.stream);
    in_->diff_done(node_.index);
  }

 protected:
  const Node& node_;
  Tensor* in_;
  Call fwd_, bwd_;
};

// Creates the exec of `node`; sets and allocates `out`.
// For a conv with a fused relu or a batch-norm with bn_relu, `fused_out` is the relu's
// output tensor (allocated here);
// for a maxpool with relu_into_pool, the relu's input tensor (its gradient is written).
std::unique_ptr<Exec> make_exec(const Node& node, const std::vector<Tensor*>& in, Tensor* out, const ExecEnv& env,
                                Tensor* fused_out = nullptr);

// Per-layer factories (one file each).
std::unique_ptr<Exec> make_conv(const Node&, Tensor* in, Tensor* out, const ExecEnv&, Tensor* fused_out);
// conv_winograd.cpp: whether a conv runs as Winograd F(2×2, 3×3) (fp32, 3×3, stride 1,
// pad ≤ 2, one group, channels in whole 8-blocks and ≥ 64, where oneDNN's direct forward kernel,
// `direct_impl`, is jit:avx2), and that exec.
bool winograd_conv_applies(const Node& node, const ExecEnv& env, const std::string& direct_impl);
std::unique_ptr<Exec> make_winograd_conv(const Node&, Tensor* in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_deconv(const Node&, Tensor* in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_upsample(const Node&, Tensor* in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_linear(const Node&, Tensor* in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_relu(const Node&, Tensor* in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_act(const Node&, Tensor* in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_pool(const Node&, Tensor* in, Tensor* out, const ExecEnv&, Tensor* relu_in = nullptr);
std::unique_ptr<Exec> make_bn(const Node&, Tensor* in, Tensor* out, const ExecEnv&, Tensor* relu_out = nullptr);
std::unique_ptr<Exec> make_dropout(const Node&, Tensor* in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_flatten(const Node&, Tensor* in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_add(const Node&, Tensor* a, Tensor* b, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_mul(const Node&, Tensor* x, Tensor* s, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_concat(const Node&, const std::vector<Tensor*>& in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_stochastic_depth(const Node&, Tensor* in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_layernorm(const Node&, Tensor* in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_layer_scale(const Node&, Tensor* in, Tensor* out, const ExecEnv&);
std::unique_ptr<Exec> make_channels(const Node&, Tensor* in, Tensor* out, const ExecEnv&);  // slice, shuffle
std::unique_ptr<Exec> make_adaptive_pool(const Node&, Tensor* in, Tensor* out, const ExecEnv&);

// Throws UserError when bf16 compute is not supported by this processor.
void require_bf16();
// The instruction set oneDNN runs its CPU kernels with here (after ONEDNN_MAX_CPU_ISA):
// "sse41", "avx", "avx2", "avx2_vnni", "avx512_core", "avx512_core_vnni", "avx512_core_bf16",
// "avx512_core_amx" (or "other").
const char* cpu_isa_name();

}  // namespace cnnscale::nn
