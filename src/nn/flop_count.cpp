// flop_count.cpp — see flop_count.hpp.
#include "nn/flop_count.hpp"

namespace cnnscale::nn {

double train_flops_per_sample(const Graph& g) {
  double f = 0;
  for (const auto& n : g.nodes) {
    double mac = 0;
    if (n.op == Op::conv)  // Conv3d: the output's depth and the kernel's too
      mac = double(n.out.c) * n.out.h * n.out.w * (n.in.c / n.groups) * n.kernel * n.kernel *
            (n.in.volume() ? double(n.out.d) * n.kernel : 1.0);
    if (n.op == Op::deconv) mac = double(n.in.c) * n.in.h * n.in.w * n.out.c * n.kernel * n.kernel;
    if (n.op == Op::linear) mac = double(n.out.c) * n.in.c;
    if (mac == 0) continue;
    f += 2.0 * mac * (n.inputs[0] == 0 ? 2 : 3);
  }
  return f;
}

}  // namespace cnnscale::nn
