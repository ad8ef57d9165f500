// models_cosmoflow.cpp — CosmoFlow (Mathuriya et al., SC18), the MLPerf HPC regression network
// for 3-D dark-matter volumes, built in as the MLPerf reference (mlcommons/hpc cosmoflow,
// models/cosmoflow.py with configs/cosmo.yaml) is written, in PyTorch's terms and with PyTorch
// state_dict names, so a cnnscale checkpoint loads into tests/nn/cosmoflow_reference.py's
// nn.Module with load_state_dict(strict=True) (tests/nn/cosmoflow_torch.sh):
//   conv1..conv5  Conv3d(in, W·2^(i-1), K, padding='same'), LeakyReLU(0.3), MaxPool3d(2)
//   flatten       (PyTorch's C, D, H, W order)
//   fc1           Linear(·, 128), LeakyReLU(0.3), Dropout(0.5)
//   fc2           Linear(128, 64), LeakyReLU(0.3), Dropout(0.5)
//   fc3           Linear(64, targets), then tanh and ×1.2 (the reference's scale_1p2)
// `cosmoflow` = `cosmoflow(32,2)`: the MLPerf configuration (conv_size 32, the reference's
// kernel_size 2 with Keras's padding 'same', i.e. one zero row at the end of each dim:
// Conv3d(k=2, padding='same') in PyTorch). `cosmoflow(W,3)`: 3×3×3 kernels padded 1 (the
// kernel of NVIDIA's and most later PyTorch ports). LeakyReLU's 0.3 is Keras's default alpha.
// Initialisation: PyTorch's defaults (the reference's Keras uses Glorot-uniform). The
// input's channels are the data set's (4 in MLPerf: the four redshifts); each side must be
// at least 32 (five halvings; 128³ in MLPerf).
#include "nn/models_cosmoflow.hpp"

#include <cstdio>
#include <string>

#include "util/error.hpp"

namespace cnnscale::nn {

bool parse_cosmoflow_name(const std::string& name, int* width, int* kernel) {
  *width = 32;
  *kernel = 2;
  if (name == "cosmoflow") return true;
  if (name.rfind("cosmoflow(", 0) != 0 || name.back() != ')') return false;
  char close = 0, extra = 0;
  const int got = std::sscanf(name.c_str(), "cosmoflow(%d%c%d%c%c", width, &close, kernel, &close, &extra);
  if (!((got == 2 && close == ')') || (got == 4 && close == ')')))
    fail("--model ", name, ": write cosmoflow, cosmoflow(W) or cosmoflow(W,K): width W (the first conv's channels, ",
         "32 in MLPerf) and kernel K (2: the reference's, padded 'same'; 3: padded 1)");
  if (got == 2) *kernel = 2;
  if (*width < 1 || *width > 4096 || (*kernel != 2 && *kernel != 3))
    fail("--model ", name, ": cosmoflow(W,K) takes a width W of 1 to 4096 and a kernel K of 2 or 3");
  return true;
}

ModelGraph cosmoflow_model(const std::string& name, const SampleShape& in, int targets) {
  int W = 0, K = 0;
  if (!parse_cosmoflow_name(name, &W, &K)) internal_error("cosmoflow_model: not a cosmoflow name: ", name);
  if (!in.volume())
    fail(name, " is a 3-D network and takes volumes (N×C×D×H×W), but the data are ", in.text(),
         " images; prep the HDF5 volumes as they are (`cnnscale prep --format hdf5 --images /x --targets /y`)");
  if (in.depth < 32 || in.height < 32 || in.width < 32)
    fail(name, " halves its input five times: each side must be at least 32, got ", in.text());
  GraphBuilder b(in);
  int x = b.input();
  for (int i = 1; i <= 5; ++i) {
    const std::string conv = "conv" + std::to_string(i);
    x = K == 2 ? b.conv(x, conv, W << (i - 1), 2, 1, 0, true, 1, 1) : b.conv(x, conv, W << (i - 1), 3, 1, 1);
    x = b.maxpool(b.act(x, Act::leaky_relu, 0.3f), 2, 2);
  }
  x = b.flatten(x);
  x = b.dropout(b.act(b.linear(x, "fc1", 128), Act::leaky_relu, 0.3f), 0.5);
  x = b.dropout(b.act(b.linear(x, "fc2", 64), Act::leaky_relu, 0.3f), 0.5);
  x = b.act(b.act(b.linear(x, "fc3", targets), Act::tanh), Act::scale, 1.2f);
  const std::string canon = "cosmoflow(" + std::to_string(W) + "," + std::to_string(K) + ")";
  return {b.finish(x, targets), canon, canon};
}

}  // namespace cnnscale::nn
