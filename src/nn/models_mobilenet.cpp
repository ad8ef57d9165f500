// models_mobilenet.cpp — torchvision's MobileNetV2 (torchvision.models.mobilenet_v2, width
// 1.0), built in with its state_dict names, shapes, registration order and initialisation,
// so that a cnnscale checkpoint loads into torchvision.models.mobilenet_v2(num_classes=K)
// with load_state_dict(strict=True) (tests/nn/zoo_torchvision.sh).
//
// features.0: Conv2dNormActivation(3, 32, stride 2): conv 3×3 (no bias) .0, bn .1, ReLU6;
// features.1..17: InvertedResidual blocks of the table (t, c, n, s) = (1,16,1,1) (6,24,2,2)
// (6,32,3,2) (6,64,4,2) (6,96,3,1) (6,160,3,2) (6,320,1,1): with t ≠ 1 an expanding 1×1
// conv.0 (.0 conv, .1 bn, ReLU6), then the depthwise 3×3 (stride s on a stage's first
// block) conv.{0|1}, the projecting 1×1 conv.{1|2} and its bn conv.{2|3}, plus the input
// when stride 1 and in = out; features.18: 1×1 to 1280 + bn + ReLU6; global average
// pool, classifier.0 dropout 0.2, classifier.1 linear. Convs kaiming_normal_(fan_out),
// bn 1/0, the linear N(0, 0.01²) with bias 0, as torchvision's __init__.
#include "nn/graph.hpp"
#include "nn/models_torchvision.hpp"
#include "util/error.hpp"

namespace cnnscale::nn {

ModelGraph torchvision_mobilenet_v2(const SampleShape& in, int classes) {
  if (in.height < 32 || in.width < 32)
    fail("mobilenet_v2 needs images of at least 32x32 (its stages halve the size five times), got ", in.height, "x",
         in.width);
  GraphBuilder b(in);
  b.set_conv_init(Init::kaiming_normal_fan_out);
  // Conv2dNormActivation: conv (padding (k-1)/2, no bias) as NAME.0, bn NAME.1, ReLU6.
  auto cna = [&](int x, const std::string& name, int out, int k, int stride, int groups) {
    x = b.conv(x, name + ".0", out, k, stride, (k - 1) / 2, false, groups);
    return b.act(b.bn(x, name + ".1"), Act::relu6);
  };
  int x = cna(b.input(), "features.0", 32, 3, 2, 1);
  int inp = 32, f = 1;
  static const int table[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2}, {6, 32, 3, 2}, {6, 64, 4, 2},
                                  {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  for (const auto& row : table) {
    const int t = row[0], c = row[1], n = row[2], s = row[3];
    for (int i = 0; i < n; ++i, ++f) {
      const std::string p = "features." + std::to_string(f) + ".conv.";
      const int stride = i == 0 ? s : 1, hidden = inp * t;
      int y = x, k = 0;
      if (t != 1) y = cna(y, p + std::to_string(k++), hidden, 1, 1, 1);
      y = cna(y, p + std::to_string(k++), hidden, 3, stride, hidden);
      y = b.conv(y, p + std::to_string(k++), c, 1, 1, 0, false);
      y = b.bn(y, p + std::to_string(k++));
      x = stride == 1 && inp == c ? b.add(x, y) : y;  // torchvision: x + self.conv(x)
      inp = c;
    }
  }
  x = cna(x, "features.18", 1280, 1, 1, 1);
  x = b.gap(x);
  x = b.flatten(x);
  x = b.dropout(x, 0.2);
  x = b.linear(x, "classifier.1", classes);
  b.set_init("classifier.1.weight", Init::normal_0_01);
  b.set_init("classifier.1.bias", Init::zeros);
  return {b.finish(x, classes), "mobilenet_v2", "mobilenet_v2"};
}

}  // namespace cnnscale::nn
