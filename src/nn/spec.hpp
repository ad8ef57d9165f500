// spec.hpp — the one-line model spec: its layer list (LayerSpec) and the parser.
// Grammar (docs/models.md):  spec := layer (WS layer)* ;  layer := NAME [ "(" args ")" ]
//   conv(out,k[,stride[,pad[,groups]]])  relu  maxpool(k[,stride[,pad[,ceil_mode]]])  avgpool(k[,stride[,pad]])  gap
//   dropout(p)  flatten  linear(out)  bn  res(spec)   (res: x + spec(x), same shape)
//   relu6  sigmoid  silu  hardswish  gelu  hardsigmoid   (activations: PyTorch's)
//   layernorm   (ConvNeXt's LayerNorm2d: nn.LayerNorm over the channels, eps 1e-5)
//   layerscale(v)   (ConvNeXt's layer scale: x · γ per channel, γ (C×1×1) starting at v)
//   adaptivepool(oh,ow)   (nn.AdaptiveAvgPool2d((oh, ow)): PyTorch's bins, any input size)
//   slice(begin,end)  shuffle(groups)   (ShuffleNetV2: x[:, begin:end]; channel_shuffle(x, groups))
//   stochastic_depth(p)   (torchvision.ops.StochasticDepth(p, "row"): a sample kept with 1 − p, scaled)
//   se(squeeze)   (squeeze-and-excitation: x · sigmoid(fc2(relu(fc1(gap(x))))))
//   cat(spec | spec | ...)   (torch.cat([b(x) for b in branches], 1); an empty branch is x)
#pragma once
#include <string>
#include <vector>

namespace cnnscale::nn {

enum class LayerKind { conv, relu, maxpool, avgpool, gap, dropout, flatten, linear, bn, res, act, se, cat, sdepth, layernorm, layerscale, slice,
                       shuffle, adaptivepool, deconv, upsample };

struct LayerSpec {
  LayerKind kind = LayerKind::relu;
  int out = 0;          // conv: out channels; linear: out features; se: squeeze channels; slice: end
  // kernel: conv, pools; slice: its first channel
  int kernel = 0;       // conv, pools
  int stride = 1;       // conv (default 1), pools (default = kernel)
  int pad = 0;          // conv, pools
  int groups = 1;       // conv (PyTorch's groups)
  bool ceil_mode = false;  // maxpool (PyTorch's ceil_mode); upsample: bilinear's align_corners
  double p = 0.0;       // dropout, stochastic_depth; layerscale: the initial value
  std::string act;      // act: relu6 sigmoid silu hardswish gelu hardsigmoid leaky_relu (slope in p)
  std::vector<LayerSpec> body;  // res
  std::vector<std::vector<LayerSpec>> branches;  // cat (an empty branch: the input itself)
  size_t pos = 0;       // column (0-based) of the token in the spec text, for errors
  size_t len = 0;       // length of the token
};

// Parses a spec; throws UserError showing the spec with a caret under the mistake.
std::vector<LayerSpec> parse_spec(const std::string& text);

// Canonical text of a layer list (round-trips through parse_spec).
std::string format_spec(const std::vector<LayerSpec>& layers);

// Throws UserError "<what>" with the spec and a caret under [pos, pos+len).
[[noreturn]] void spec_error(const std::string& text, size_t pos, size_t len, const std::string& what);

}  // namespace cnnscale::nn
