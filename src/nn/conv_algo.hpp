// conv_algo.hpp — how the GPU model chooses its cuDNN convolution algorithms, without
// CUDA (the cuDNN calls are in nn/cuda/layer_conv.cpp): which candidate wins, the key
// of the per-model cache, and the text form of the choices that checkpoints store.
//
// Candidates come from cuDNN as (algorithm id, status, time, workspace bytes,
// determinism): measured by cudnnFindConvolution*Algorithm (train --cudnn-benchmark on,
// the default; as torch.backends.cudnn.benchmark = True) or ranked by cuDNN's
// heuristics, cudnnGetConvolution*Algorithm_v7 (--cudnn-benchmark off). Either way an
// algorithm must have succeeded and need at most kMaxConvWorkspace bytes of workspace.
//
// Deterministic algorithms win over faster non-deterministic ones: a non-deterministic
// one (atomics in backward-filter or backward-data) sums in a different order on each
// call, so a rerun of the same steps, or a resumed run against the uninterrupted one,
// would not give the same bits. Only where cuDNN offers no deterministic algorithm
// within the cap does the non-deterministic one run (the run then trains, but is not
// bitwise reproducible).
//
// One choice per distinct problem (ConvProblem::key(): direction, batch, input shape,
// filter, padding, stride, math type): the identical convolutions of a ResNet stage
// are benchmarked once. The choices, as text (format_tuning/parse_tuning), are what
// Model::tuning()/set_tuning() exchange: a checkpoint stores them and a resumed run
// reapplies them, so that it runs the algorithms of the run it continues (benchmark
// timings vary from run to run, and so would the winner).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cnnscale::nn {

// Workspace cap per convolution algorithm (one workspace is shared by all layers).
constexpr size_t kMaxConvWorkspace = size_t{512} << 20;

enum class ConvDir { forward, backward_data, backward_filter };

// The data type, layout and math of a convolution: fma = fp32 NCHW data with
// CUDNN_FMA_MATH (full fp32); tf32 = fp32 NCHW data with CUDNN_DEFAULT_MATH (TF32
// tensor cores allowed); tf32nhwc = fp32 NHWC copies with CUDNN_DEFAULT_MATH (the TF32
// default on compute capability 8 and later: cuDNN's tensor-core kernels read NHWC);
// bf16 = bf16 NHWC data and filters, fp32 accumulation, CUDNN_TENSOR_OP_MATH
// (--precision bf16 on the GPU, nn/cuda/layer_conv.cpp).
enum class ConvMath { fma, tf32, bf16, tf32_nhwc };

// What cuDNN's choice depends on, besides the GPU and the cuDNN version: an input of
// n×c×h×w, k filters of kernel×kernel, symmetric padding and stride, dilation 1, and
// the math (data type and layout with it).
struct ConvProblem {
  ConvDir dir = ConvDir::forward;
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t k = 0, kernel = 0, pad = 0, stride = 0;
  ConvMath math = ConvMath::fma;
  // "fwd n=64 c=3 h=32 w=32 k=16 kernel=3 pad=1 stride=1 math=fma"; directions fwd,
  // bwd_data, bwd_filter; math fma, tf32, tf32nhwc or bf16. The cache key and a tuning
  // line's head.
  std::string key() const;
};

// "forward", "backward-data", "backward-filter" (messages).
const char* conv_dir_name(ConvDir d);

// One candidate as cuDNN reports it.
struct AlgoResult {
  int algo = 0;           // the cudnnConvolution*Algo_t value
  bool ok = false;        // status CUDNN_STATUS_SUCCESS
  float time_ms = 0;      // measured (benchmark); heuristics report no useful time
  size_t memory = 0;      // workspace bytes
  bool deterministic = false;
  // The cudnnMathType_t cuDNN ran (or would run) it with: cudnnFind lists an algorithm
  // once per math type it tried (with CUDNN_DEFAULT_MATH for fp32 data, plain FMA and
  // TF32 tensor-op kernels are different candidates). -1: not reported.
  int math_type = -1;
};

// A convolution's choice: the algorithm and the math type to run it with (set on that
// direction's convolution descriptor, as PyTorch does with the perf result's mathType:
// timing one math type and running another runs an untimed kernel). math_type -1: the
// descriptor's own (records written before the math type was kept).
struct ConvChoice {
  int algo = 0;
  int math_type = -1;
  ConvChoice() = default;
  ConvChoice(int a, int m = -1) : algo(a), math_type(m) {}  // NOLINT: an id is a choice
  bool operator==(const ConvChoice& o) const { return algo == o.algo && math_type == o.math_type; }
};

// --cudnn-benchmark on: the fastest usable deterministic candidate (ties: less
// workspace, then the lower id, then the lower math type, so that equal timings choose
// alike on every run); without a usable deterministic one, the fastest usable one.
// Throws UserError ("cuDNN offers no usable <what> algorithm ... workspace cap; lower
// --batch-size ...") when none is usable.
ConvChoice pick_fastest(const std::vector<AlgoResult>& results, size_t cap, const char* what);
int choose_fastest(const std::vector<AlgoResult>& results, size_t cap, const char* what);  // its algorithm id

// --cudnn-benchmark off: results in cuDNN's heuristic ranking; the first usable
// deterministic one, else the first usable one; the same error when none is usable.
ConvChoice pick_ranked(const std::vector<AlgoResult>& results, size_t cap, const char* what);
int choose_ranked(const std::vector<AlgoResult>& results, size_t cap, const char* what);  // its algorithm id

// ConvProblem::key() → the choice.
using ConvTuning = std::map<std::string, ConvChoice>;

// One line per problem, sorted: "<key> algo=<id>[ mathtype=<m>]", after an optional
// "# comment" line (the cuDNN version and GPU, for people). Empty text for an empty
// tuning.
std::string format_tuning(const ConvTuning& t, const std::string& comment = "");

// The inverse of format_tuning: blank lines and lines starting with '#' are skipped;
// any other line must be a well-formed key (as ConvProblem::key writes it) followed by
// " algo=<id>" with id >= 0 and optionally " mathtype=<m>" (a cudnnMathType_t, 0..3; records from before
// it was kept have none). Throws UserError naming the line and its number otherwise.
ConvTuning parse_tuning(const std::string& text);

}  // namespace cnnscale::nn
