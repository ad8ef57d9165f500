// exec.cpp — Buffer, Call, Tensor, Convert and the exec factory (see exec.hpp).
#include "nn/exec.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "util/bf16.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {

namespace {
std::atomic<size_t> g_owned{0};
}

size_t Buffer::owned_total() { return g_owned.load(std::memory_order_relaxed); }

Buffer::~Buffer() {
  if (owned_) {
    std::free(p_);
    g_owned -= n_;
  }
}

void Buffer::adopt(void* p, size_t bytes) {
  if (owned_) {
    std::free(p_);
    g_owned -= n_;
  }
  p_ = p;
  n_ = bytes;
  owned_ = false;
}

void Buffer::resize(size_t bytes) {
  if (owned_) {
    std::free(p_);
    g_owned -= n_;
  }
  owned_ = true;
  p_ = nullptr;
  n_ = 0;
  if (bytes == 0) return;
  p_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!p_) throw std::bad_alloc();
  n_ = bytes;
  g_owned += n_;
  std::memset(p_, 0, bytes);
}

void Buffer::release_pages() {
  if (!owned_ || !p_) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p_) + page - 1) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p_) + n_) / page * page;
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

void Call::run(const dnnl::stream& s) const {
  dnnl_status_t st = dnnl_primitive_execute(prim.get(), s.get(), static_cast<int>(args.size()), args.data());
  if (st != dnnl_success) throw std::runtime_error("oneDNN primitive execution failed (status " + std::to_string(st) + ")");
}

void Tensor::alloc(const md_t& m, const dnnl::engine& eng, void* data_alias, void* diff_alias) {
  md = m;
  const size_t bytes = md.get_size();
  if (!data_alias) data.resize(bytes);
  data_ptr_ = static_cast<float*>(data_alias ? data_alias : data.data());
  mem = dnnl::memory(md, eng, data_ptr_);
  if (needs_diff) {
    // An arena slot when the layout fits (it always does for the bound net.cpp uses;
    // the own buffer is the safe fallback).
    auto place = [&](Buffer& own, void* slot, size_t slot_bytes) {
      if (slot && bytes <= slot_bytes) return static_cast<float*>(slot);
      own.resize(bytes);
      return own.f();
    };
    diff_ptr_ = diff_alias ? static_cast<float*>(diff_alias) : place(diff, diff_slot, diff_slot_bytes);
    diff_mem = dnnl::memory(md, eng, diff_ptr_);
    if (consumers > 1) {
      scratch_ptr_ = place(scratch, scratch_slot, scratch_slot_bytes);
      scratch_mem = dnnl::memory(md, eng, scratch_ptr_);
    }
  }
}

namespace {
// d += s over bf16 values: each sum in f32, rounded to nearest even (as PyTorch sums
// the bf16 gradients of a tensor read twice); a NaN stays a NaN (util/bf16.hpp).
__attribute__((target_clones("arch=skylake-avx512", "avx2", "default"))) void add_bf16(uint16_t* d, const uint16_t* s,
                                                                            size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = float_to_bf16(bf16_to_float(d[i]) + bf16_to_float(s[i]));
}
}  // namespace

void Tensor::diff_done(int node) {
  if (node == last_consumer) return;
  if (md.data_type() == dt::bf16) {
    add_bf16(reinterpret_cast<uint16_t*>(diff_ptr_), reinterpret_cast<const uint16_t*>(scratch_ptr_),
             md.get_size() / 2);
    return;
  }
  float* d = diff_ptr_;
  const float* s = scratch_ptr_;
  const size_t n = md.get_size() / sizeof(float);
  for (size_t i = 0; i < n; ++i) d[i] += s[i];
}

int channel_block(const md_t& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.ndims != 4 || d.data_type != dnnl_f32) return 0;
  const auto& bk = d.format_desc.blocking;
  const int64_t H = d.dims[2], W = d.dims[3];
  if (bk.inner_nblks == 0) {
    const int64_t C = d.dims[1];
    return bk.strides[3] == 1 && bk.strides[2] == W && bk.strides[1] == H * W && bk.strides[0] == C * H * W ? 1 : 0;
  }
  if (bk.inner_nblks != 1 || bk.inner_idxs[0] != 1) return 0;
  const int B = static_cast<int>(bk.inner_blks[0]);
  if (B != 8 && B != 16) return 0;
  const int64_t blocks = d.padded_dims[1] / B;
  const bool dense = bk.strides[3] == B && bk.strides[2] == W * B && bk.strides[1] == H * W * B &&
                     bk.strides[0] == blocks * H * W * B;
  return dense ? B : 0;
}

md_t channel_layer_md(const Tensor& x, int* block) {
  const int b = channel_block(x.md);
  if ((b == 8 || b == 16) && x.dims.size() == 4 && x.dims[1] % b == 0) {
    *block = b;
    return x.md;
  }
  *block = 1;
  return plain_md(x.dims);
}

bool channel_sums_supported(const md_t& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked || d.ndims < 3 || d.ndims > 5) return false;
  if (d.data_type != dnnl_f32 && d.data_type != dnnl_bf16) return false;
  const auto& bk = d.format_desc.blocking;
  return bk.inner_nblks == 0 || (bk.inner_nblks == 1 && bk.inner_idxs[0] == 1 && bk.inner_blks[0] <= 16);
}

namespace {
// One row (the innermost spatial dim) of a channel block's lanes, summed in float per
// lane, added to `part` in double. B > 0: the block size known at compile time (vectorised).
template <int B, class T>
void row_sums(const T* x, int64_t count, int64_t stride, int64_t lanes, double* part) {
  const int64_t L = B ? B : lanes;
  float f[16] = {0};
  auto load = [](const T& v) {
    if constexpr (sizeof(T) == 2) {
      const uint32_t bits = uint32_t{v} << 16;
      float r;
      std::memcpy(&r, &bits, 4);
      return r;
    } else {
      return v;
    }
  };
  for (int64_t i = 0; i < count; ++i)
    for (int64_t l = 0; l < L; ++l) f[l] += load(x[i * stride + l]);
  for (int64_t l = 0; l < L; ++l) part[l] += f[l];
}

template <class T>
void channel_sums_typed(const dnnl_memory_desc_t& d, const T* base, float* out, std::vector<double>& acc) {
  const auto& bk = d.format_desc.blocking;
  const int64_t B = bk.inner_nblks == 1 ? bk.inner_blks[0] : 1;  // channels per block (innermost)
  const int64_t N = d.dims[0], C = d.dims[1], blocks = (C + B - 1) / B;
  int64_t sd[3] = {1, 1, 1}, ss[3] = {0, 0, 0};  // spatial sizes and strides (up to 3 dims)
  const int nsp = d.ndims - 2;
  for (int i = 0; i < nsp; ++i) {
    sd[3 - nsp + i] = d.dims[2 + i];
    ss[3 - nsp + i] = bk.strides[2 + i];
  }
  acc.assign(static_cast<size_t>(blocks * B), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t cb = 0; cb < blocks; ++cb) {
      double* part = acc.data() + cb * B;
      const T* x0 = base + n * bk.strides[0] + cb * bk.strides[1];
      for (int64_t a = 0; a < sd[0]; ++a)
        for (int64_t b = 0; b < sd[1]; ++b) {
          const T* row = x0 + a * ss[0] + b * ss[1];
          if (B == 8) row_sums<8>(row, sd[2], ss[2], B, part);
          else if (B == 16) row_sums<16>(row, sd[2], ss[2], B, part);
          else row_sums<0>(row, sd[2], ss[2], B, part);
        }
    }
  for (int64_t c = 0; c < C; ++c) out[c] = static_cast<float>(acc[static_cast<size_t>(c)]);
}
}  // namespace

void channel_sums(const dnnl::memory& m, float* out, std::vector<double>& acc) {
  const md_t md = m.get_desc();
  if (!channel_sums_supported(md)) internal_error("channel_sums: unsupported layout");
  const dnnl_memory_desc_t& d = md.data;
  if (d.data_type == dnnl_bf16)
    channel_sums_typed(d, static_cast<const uint16_t*>(m.get_data_handle()) + d.offset0, out, acc);
  else
    channel_sums_typed(d, static_cast<const float*>(m.get_data_handle()) + d.offset0, out, acc);
}

md_t plain_md(const std::vector<int64_t>& dims, dt type) {
  dnnl::memory::dims d(dims.begin(), dims.end());
  switch (dims.size()) {
    case 1: return md_t(d, type, tag::x);
    case 2: return md_t(d, type, tag::nc);
    case 4: return md_t(d, type, tag::nchw);
    case 5: return md_t(d, type, tag::ncdhw);  // volumes
    default: throw std::logic_error("plain_md: unsupported rank");
  }
}

void Convert::place(const md_t& m, const dnnl::engine& eng, Transients* t) {
  if (t) {
    transient_bytes = m.get_size();
    out = dnnl::memory(m, eng, nullptr);  // the handle is set when the plan is complete
    t->uses.push_back({t->node, this});
  } else {
    buf.resize(m.get_size());
    out = dnnl::memory(m, eng, buf.data());
  }
}

void Convert::init(const dnnl::memory& from, const md_t& want, const dnnl::engine& eng, Transients* t) {
  if (from.get_desc() == want) {
    out = from;
    return;
  }
  place(want, eng, t);
  call.set(dnnl::reorder(from, out));
  call.arg(DNNL_ARG_FROM, from);
  call.arg(DNNL_ARG_TO, out);
}

void Convert::init_into(const md_t& have, const dnnl::memory& to, const dnnl::engine& eng, Transients* t) {
  if (to.get_desc() == have) {
    out = to;
    return;
  }
  place(have, eng, t);
  call.set(dnnl::reorder(out, to));
  call.arg(DNNL_ARG_FROM, out);
  call.arg(DNNL_ARG_TO, to);
}

const char* cpu_isa_name() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

void require_bf16() {
  const auto isa = dnnl::get_effective_cpu_isa();
  if (isa != dnnl::cpu_isa::avx512_core_bf16 && isa != dnnl::cpu_isa::avx512_core_amx)
    fail("--precision bf16: this processor (or ONEDNN_MAX_CPU_ISA) lacks native bf16 support (oneDNN runs ",
         cpu_isa_name(), " here; bf16 needs AVX512-BF16 or AMX); use --precision fp32");
}

std::unique_ptr<Exec> make_exec(const Node& node, const std::vector<Tensor*>& in, Tensor* out, const ExecEnv& env,
                                Tensor* fused_out) {
  switch (node.op) {
    case Op::conv: return make_conv(node, in[0], out, env, fused_out);
    case Op::deconv: return make_deconv(node, in[0], out, env);
    case Op::upsample: return make_upsample(node, in[0], out, env);
    case Op::linear: return make_linear(node, in[0], out, env);
    case Op::relu: return make_relu(node, in[0], out, env);
    case Op::act: return make_act(node, in[0], out, env);
    case Op::maxpool:
    case Op::avgpool: return make_pool(node, in[0], out, env, fused_out);
    case Op::bn: return make_bn(node, in[0], out, env, fused_out);
    case Op::dropout: return make_dropout(node, in[0], out, env);
    case Op::flatten: return make_flatten(node, in[0], out, env);
    case Op::add: return make_add(node, in[0], in[1], out, env);
    case Op::mul: return make_mul(node, in[0], in[1], out, env);
    case Op::concat: return make_concat(node, in, out, env);
    case Op::stochastic_depth: return make_stochastic_depth(node, in[0], out, env);
    case Op::layernorm: return make_layernorm(node, in[0], out, env);
    case Op::layer_scale: return make_layer_scale(node, in[0], out, env);
    case Op::channel_slice:
    case Op::channel_shuffle: return make_channels(node, in[0], out, env);
    case Op::adaptive_avgpool: return make_adaptive_pool(node, in[0], out, env);
  }
  throw std::logic_error("make_exec: unknown op");
}

}  // namespace cnnscale::nn
