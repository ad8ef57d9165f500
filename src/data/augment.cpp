// augment.cpp — see augment.hpp.
#include "data/augment.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <regex>

#include "data/resample.hpp"
#include "data/sampler.hpp"
#include "util/error.hpp"

namespace cnnscale {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
constexpr uint64_t kAugmentSalt = 0x6175676d656e7431ull;  // "augment1"

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

std::string augment_valid_names() {
  return "crop<S>pad<P> (RandomCrop(S, padding=P), S = the image size, e.g. crop32pad4), hflip "
         "(RandomHorizontalFlip(p=0.5)), rrc<S> (RandomResizedCrop(S), e.g. rrc224), center<S> (CenterCrop(S)) and "
         "resize<S> (Resize(S)); for volumes flip3d (each of D, H, W reversed with probability 1/2) and transpose3d "
         "(a random permutation of D, H, W; cubes); comma-separated, or none";
}

std::vector<AugmentStep> parse_augment(const std::string& list) {
  std::vector<AugmentStep> steps;
  const std::string all = trim(list);
  if (all.empty() || all == "none") return steps;
  static const std::regex crop_re("crop([0-9]{1,9})pad([0-9]{1,9})");
  static const std::regex rrc_re("rrc([0-9]{1,9})"), center_re("center([0-9]{1,9})"), resize_re("resize([0-9]{1,9})");
  // A side beyond 65535 is no CNN input (and the evaluation's resize of rrc<S>, S / 0.875,
  // must stay a valid step): refused here, naming the step (issue 26 item 12).
  auto at_most = [](const std::string& name, int v, int limit = kMaxAugmentSide) {
    if (v > limit) fail("--augment ", name, ": sizes above ", limit, " are not CNN inputs; give a smaller size");
  };
  size_t at = 0;
  while (true) {
    const size_t comma = all.find(',', at);
    const std::string name = trim(all.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    AugmentStep s;
    s.name = name;
    std::smatch m;
    if (name == "hflip") {
      s.kind = AugmentStep::Kind::hflip;
    } else if (name == "flip3d" || name == "transpose3d") {
      s.kind = name == "flip3d" ? AugmentStep::Kind::flip3d : AugmentStep::Kind::transpose3d;
    } else if (std::regex_match(name, m, crop_re)) {
      s.kind = AugmentStep::Kind::crop;
      s.size = std::stoi(m[1]);
      s.pad = std::stoi(m[2]);
      if (s.size < 1) fail("--augment ", name, ": the crop size must be at least 1");
      at_most(name, s.size);
      at_most(name, s.pad);
    } else if (std::regex_match(name, m, rrc_re) || std::regex_match(name, m, center_re)) {
      s.kind = name[0] == 'r' ? AugmentStep::Kind::rrc : AugmentStep::Kind::center;
      s.size = std::stoi(m[1]);
      if (s.size < 1) fail("--augment ", name, ": the output size must be at least 1");
      at_most(name, s.size);
    } else if (std::regex_match(name, m, resize_re)) {
      s.kind = AugmentStep::Kind::resize;
      s.size = std::stoi(m[1]);
      if (s.size < 1) fail("--augment ", name, ": the size must be at least 1");
      at_most(name, s.size, 2 * kMaxAugmentSide);  // the evaluation's resize of rrc<S> is S / 0.875
    } else {
      fail("--augment '", list, "': unknown step '", name, "'; valid steps are ", augment_valid_names());
    }
    steps.push_back(s);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return steps;
}

AugmentDraw augment_draw(const AugmentStep& step, int k, uint64_t seed, int epoch, int64_t g, SampleShape shape) {
  uint64_t h = mix64(seed ^ kAugmentSalt);
  h = mix64(h + kGolden * (static_cast<uint64_t>(epoch) + 1));
  h = mix64(h ^ mix64(static_cast<uint64_t>(g) + kGolden));
  h = mix64(h + kGolden * (static_cast<uint64_t>(k) + 1));
  SplitMix64 rng(h);
  AugmentDraw d;
  if (step.kind == AugmentStep::Kind::crop) {
    d.top = static_cast<int>(rng.below(static_cast<uint64_t>(shape.height + 2 * step.pad - step.size + 1)));
    d.left = static_cast<int>(rng.below(static_cast<uint64_t>(shape.width + 2 * step.pad - step.size + 1)));
  } else if (step.kind == AugmentStep::Kind::hflip) {
    d.flip = (rng.next() >> 63) != 0;
  } else if (step.kind == AugmentStep::Kind::flip3d) {
    d.axes = static_cast<int>(rng.next() >> 61);  // 3 bits: D, H, W
  } else if (step.kind == AugmentStep::Kind::transpose3d) {
    d.axes = static_cast<int>(rng.below(6));
  } else if (step.kind == AugmentStep::Kind::rrc) {
    // torchvision RandomResizedCrop.get_params, scale (0.08, 1), ratio (3/4, 4/3).
    const int H = shape.height, W = shape.width;
    const double area = static_cast<double>(H) * W, lo = std::log(3.0 / 4.0), hi = std::log(4.0 / 3.0);
    auto uniform = [&] { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; };
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target = area * (0.08 + (1.0 - 0.08) * uniform());
      const double ratio = std::exp(lo + (hi - lo) * uniform());
      const int w = static_cast<int>(std::nearbyint(std::sqrt(target * ratio)));
      const int hh = static_cast<int>(std::nearbyint(std::sqrt(target / ratio)));
      if (0 < w && w <= W && 0 < hh && hh <= H) {
        d.h = hh;
        d.w = w;
        d.top = static_cast<int>(rng.below(static_cast<uint64_t>(H - hh + 1)));
        d.left = static_cast<int>(rng.below(static_cast<uint64_t>(W - w + 1)));
        return d;
      }
    }
    const double in_ratio = static_cast<double>(W) / H;
    if (in_ratio < 3.0 / 4.0) {
      d.w = W;
      d.h = static_cast<int>(std::nearbyint(W / (3.0 / 4.0)));
    } else if (in_ratio > 4.0 / 3.0) {
      d.h = H;
      d.w = static_cast<int>(std::nearbyint(H * (4.0 / 3.0)));
    } else {
      d.w = W;
      d.h = H;
    }
    d.top = (H - d.h) / 2;
    d.left = (W - d.w) / 2;
  }
  return d;
}

void crop_padded(const uint8_t* src, uint8_t* dst, SampleShape shape, int pad, int top, int left) {
  const int H = shape.height, W = shape.width;
  const int dy = top - pad, dx = left - pad;                            // dst(y, x) = src(y + dy, x + dx)
  const int x0 = std::clamp(-dx, 0, W), x1 = std::clamp(W - dx, 0, W);  // dst columns with a source pixel
  for (int c = 0; c < shape.channels; ++c) {
    const uint8_t* s = src + int64_t{c} * H * W;
    uint8_t* d = dst + int64_t{c} * H * W;
    for (int y = 0; y < H; ++y) {
      uint8_t* row = d + int64_t{y} * W;
      const int sy = y + dy;
      if (sy < 0 || sy >= H || x0 >= x1) {
        std::memset(row, 0, static_cast<size_t>(W));
        continue;
      }
      std::memset(row, 0, static_cast<size_t>(x0));
      std::memcpy(row + x0, s + int64_t{sy} * W + x0 + dx, static_cast<size_t>(x1 - x0));
      std::memset(row + x1, 0, static_cast<size_t>(W - x1));
    }
  }
}

void flip_horizontal(const uint8_t* src, uint8_t* dst, SampleShape shape) {
  const int W = shape.width;
  const int64_t rows = int64_t{shape.channels} * shape.height;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* s = src + r * W;
    uint8_t* d = dst + r * W;
    for (int x = 0; x < W; ++x) d[x] = s[W - 1 - x];
  }
}

void resized_crop(const uint8_t* src, uint8_t* dst, SampleShape shape, int top, int left, int h, int w, int size,
                  bool flip) {
  thread_local PlaneResampler r;  // the window is read in place: no copy, coefficients once per sample
  r.set(w, h, size, size);
  const int64_t plane = int64_t{shape.height} * shape.width;
  for (int c = 0; c < shape.channels; ++c)
    r.run(src + c * plane + int64_t{top} * shape.width + left, shape.width, dst + int64_t{c} * size * size, flip);
}

void center_crop_planes(const uint8_t* src, uint8_t* dst, SampleShape shape, int size) {
  // torchvision CenterCrop: zero-pad what is smaller than size (left/top get the floor
  // half), then crop at round((H' - size) / 2), round((W' - size) / 2), half to even.
  const int H = shape.height, W = shape.width;
  const int pl = size > W ? (size - W) / 2 : 0, pt = size > H ? (size - H) / 2 : 0;
  const int Wp = size > W ? W + pl + (size - W + 1) / 2 : W, Hp = size > H ? H + pt + (size - H + 1) / 2 : H;
  const int top = static_cast<int>(std::nearbyint((Hp - size) / 2.0)),
            left = static_cast<int>(std::nearbyint((Wp - size) / 2.0));
  for (int c = 0; c < shape.channels; ++c) {
    const uint8_t* s = src + int64_t{c} * H * W;
    uint8_t* d = dst + int64_t{c} * size * size;
    for (int y = 0; y < size; ++y)
      for (int x = 0; x < size; ++x) {
        const int sy = y + top - pt, sx = x + left - pl;
        d[y * size + x] = (sy >= 0 && sy < H && sx >= 0 && sx < W) ? s[sy * W + sx] : 0;
      }
  }
}

SampleShape resize_shape(SampleShape shape, int size) {
  const bool w_short = shape.width <= shape.height;
  const int s = w_short ? shape.width : shape.height, l = w_short ? shape.height : shape.width;
  // int(size·long/short) as torchvision; beyond int's range (an extreme aspect ratio, which
  // the Augmenter's size bound then refuses) held at INT_MAX rather than overflowing.
  const double want = static_cast<double>(int64_t{size} * l) / s;
  const int new_long = want >= 2147483647.0 ? 2147483647 : static_cast<int>(want);
  return {shape.channels, w_short ? new_long : size, w_short ? size : new_long};
}

void resize_planes(const uint8_t* src, uint8_t* dst, SampleShape shape, int size) {
  const SampleShape o = resize_shape(shape, size);
  if (o.height == shape.height && o.width == shape.width) {
    std::memcpy(dst, src, static_cast<size_t>(shape.numel()));
    return;
  }
  thread_local PlaneResampler r;
  r.set(shape.width, shape.height, o.width, o.height);
  for (int c = 0; c < shape.channels; ++c)
    r.run(src + int64_t{c} * shape.height * shape.width, shape.width, dst + int64_t{c} * o.height * o.width);
}

Augmenter::Augmenter(const std::string& list, SampleShape shape, uint64_t seed, bool ragged)
    : steps_(parse_augment(list)), shape_(shape), out_shape_(shape), seed_(seed), ragged_(ragged) {
  volume_ = shape.volume() && !steps_.empty();
  for (const auto& s : steps_) {
    if (s.volume() && !shape.volume())
      fail("--augment ", s.name, " moves the voxels of volumes, but this data set holds images (", shape.text(),
           "); for images use ", "hflip, crop<S>pad<P>, rrc<S>, center<S> or resize<S>");
    if (!s.volume() && shape.volume())
      fail("--augment ", s.name, " works on images, but this data set holds volumes (", shape.text(),
           "); for volumes use flip3d and transpose3d (e.g. --augment flip3d,transpose3d)");
    if (s.kind == AugmentStep::Kind::transpose3d && (shape.depth != shape.height || shape.height != shape.width))
      fail("--augment transpose3d permutes the axes D, H, W, which keeps the shape only of a cube; this data set's "
           "volumes are ", shape.text(), "; use flip3d alone");
  }
  if (volume_) {
    shapes_.assign(steps_.size(), shape);
    return;
  }
  bool variable = ragged;  // the image reaching the step has a per-sample size
  // Every step's output is held by each reader thread (twice, between steps): a size that
  // only a mistake asks for (rrc48476 before rrc224) is refused here rather than running the
  // reader out of memory (found by tests/fuzz/fuzz_augment).
  auto bounded = [&](const AugmentStep& s) {
    if (out_shape_.numel() > kMaxAugmentSampleBytes)
      fail("--augment ", s.name, " makes samples of ", out_shape_.text(), " (", out_shape_.numel() >> 20,
           " MiB each), more than the ", kMaxAugmentSampleBytes >> 20, " MiB a reader thread holds per sample; ",
           "give that step a smaller size");
  };
  for (const auto& s : steps_) {
    shapes_.push_back(variable ? SampleShape{shape.channels, 0, 0} : out_shape_);
    if (s.kind == AugmentStep::Kind::rrc || s.kind == AugmentStep::Kind::center) {
      out_shape_ = {shape.channels, s.size, s.size};
      variable = false;
      bounded(s);
      continue;
    }
    if (s.kind == AugmentStep::Kind::resize) {
      if (!variable) out_shape_ = resize_shape(out_shape_, s.size);
      bounded(s);
      continue;
    }
    if (variable)
      fail("--augment ", s.name, " needs images of one size but this data set stores variable-size images (prep ",
           "--store original-max); put rrc<S> or center<S> before it (e.g. rrc224,hflip or center224,", s.name, ")");
    if (s.kind != AugmentStep::Kind::crop) continue;
    const SampleShape cur = out_shape_;
    if (cur.height != s.size || cur.width != s.size)
      fail("--augment ", s.name, " cuts ", s.size, "x", s.size, " windows but the images ",
           shapes_.size() == 1 ? "of this data set" : "reaching it", " are ", cur.height, "x", cur.width, "; ",
           cur.height == cur.width ? "use crop" + std::to_string(cur.height) + "pad" + std::to_string(s.pad) +
                                         " (the crop keeps the sample shape)"
                                   : std::string("crop needs square images (prep them with a square --center-crop)"));
  }
  if (variable)
    fail("--augment '", list, "' leaves the images of this data set at their variable stored sizes (prep --store ",
         "original-max); a batch needs one size: ", steps_.empty() ? "pass" : "end the list with",
         " rrc<S> or center<S> (e.g. --augment rrc224,hflip)");
}

Augmenter Augmenter::for_evaluation() const {
  std::string list;
  for (const auto& s : steps_) {
    std::string step;
    if (s.kind == AugmentStep::Kind::rrc && ragged_)
      step = "resize" + std::to_string(static_cast<int>(s.size / 0.875)) + ",center" + std::to_string(s.size);
    else if (s.kind == AugmentStep::Kind::rrc || s.kind == AugmentStep::Kind::center)
      step = "center" + std::to_string(s.size);
    else if (s.kind == AugmentStep::Kind::resize) step = s.name;
    if (step.empty()) continue;
    if (!list.empty()) list += ",";
    list += step;
  }
  return Augmenter(list, shape_, seed_, ragged_);
}

template <class T>
void permute_flip_volume(const T* src, T* dst, int channels, const int dims[3], const int perm[3], const bool flip[3]) {
  const int64_t in_stride[3] = {int64_t{dims[1]} * dims[2], dims[2], 1};
  int64_t n[3], st[3], base = 0;
  for (int a = 0; a < 3; ++a) {
    n[a] = dims[perm[a]];
    st[a] = in_stride[perm[a]];
    if (flip[a]) {
      base += (n[a] - 1) * st[a];
      st[a] = -st[a];
    }
  }
  const int64_t plane = int64_t{dims[0]} * dims[1] * dims[2];
  for (int c = 0; c < channels; ++c) {
    const T* s = src + c * plane + base;
    T* d = dst + c * plane;
    for (int64_t i0 = 0; i0 < n[0]; ++i0)
      for (int64_t i1 = 0; i1 < n[1]; ++i1) {
        const T* r = s + i0 * st[0] + i1 * st[1];
        if (st[2] == 1) d = std::copy_n(r, n[2], d);
        else
          for (int64_t i2 = 0; i2 < n[2]; ++i2) *d++ = r[i2 * st[2]];
      }
  }
}
template void permute_flip_volume<float>(const float*, float*, int, const int[3], const int[3], const bool[3]);
template void permute_flip_volume<int32_t>(const int32_t*, int32_t*, int, const int[3], const int[3], const bool[3]);

namespace {

// Step s's draw d as a permutation and flips (permute_flip_volume's arguments).
void volume_step(const AugmentStep& s, const AugmentDraw& d, int perm[3], bool flip[3]) {
  static constexpr int kPerms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int a = 0; a < 3; ++a) {
    perm[a] = s.kind == AugmentStep::Kind::transpose3d ? kPerms[d.axes][a] : a;
    flip[a] = s.kind == AugmentStep::Kind::flip3d && ((d.axes >> a) & 1);
  }
}

// The volume steps on one C×D×H×W (label map: 1×D×H×W) sample in place, composed into one
// pass: step (q, g) after (perm, flip) reads output axis a from input axis perm[q[a]],
// reversed when g[a] xor flip[q[a]].
template <class T>
void apply_volume_steps(const Augmenter& a, T* x, int channels, int epoch, int64_t g, std::vector<T>& scratch) {
  const SampleShape in = a.input_shape();
  const int dims[3] = {in.depth, in.height, in.width};
  int perm[3] = {0, 1, 2};
  bool flip[3] = {false, false, false};
  for (size_t k = 0; k < a.steps().size(); ++k) {
    int q[3];
    bool f[3];
    volume_step(a.steps()[k], a.draw(k, epoch, g, in), q, f);
    const int p0[3] = {perm[0], perm[1], perm[2]};
    const bool f0[3] = {flip[0], flip[1], flip[2]};
    for (int i = 0; i < 3; ++i) {
      perm[i] = p0[q[i]];
      flip[i] = f[i] != f0[q[i]];
    }
  }
  if (perm[0] == 0 && perm[1] == 1 && perm[2] == 2 && !flip[0] && !flip[1] && !flip[2]) return;
  scratch.assign(x, x + channels * in.plane());
  permute_flip_volume(scratch.data(), x, channels, dims, perm, flip);
}

}  // namespace

void Augmenter::apply_volume(float* x, int epoch, int64_t g, std::vector<float>& scratch) const {
  if (!volume_) internal_error("Augmenter::apply_volume on an image pipeline");
  apply_volume_steps(*this, x, shape_.channels, epoch, g, scratch);
}

void Augmenter::apply(const uint8_t* src, uint8_t* dst, int epoch, int64_t g, std::vector<uint8_t>& scratch) const {
  apply(src, shape_, dst, epoch, g, scratch);
}

void Augmenter::apply(const uint8_t* src, SampleShape in, uint8_t* dst, int epoch, int64_t g,
                      std::vector<uint8_t>& scratch) const {
  apply_from(0, src, in, dst, epoch, g, scratch);
}

void Augmenter::apply_from(size_t first, const uint8_t* src, SampleShape in, uint8_t* dst, int epoch, int64_t g,
                           std::vector<uint8_t>& scratch) const {
  if (volume_) internal_error("Augmenter::apply on a volume pipeline (apply_volume)");
  if (in.channels != shape_.channels)
    internal_error("augment: a ", in.channels, "-channel sample in a ", shape_.channels, "-channel pipeline");
  if (first >= steps_.size()) {
    std::memcpy(dst, src, static_cast<size_t>(in.numel()));
    return;
  }
  // Two ping-pong buffers (scratch and one per thread); shapes are followed step by step,
  // since on ragged data they depend on the sample. rrc<S> followed by hflip is one pass
  // (the resampler writes the columns mirrored): the same bytes as the two steps.
  thread_local std::vector<uint8_t> other;
  std::vector<uint8_t>* bufs[2] = {&scratch, &other};
  int next_buf = 0;
  const uint8_t* cur = src;
  for (size_t k = first; k < steps_.size(); ++k) {
    const AugmentStep& s = steps_[k];
    const bool fuse_flip =
        s.kind == AugmentStep::Kind::rrc && k + 1 < steps_.size() && steps_[k + 1].kind == AugmentStep::Kind::hflip;
    SampleShape out_sh = in;
    if (s.kind == AugmentStep::Kind::rrc || s.kind == AugmentStep::Kind::center) out_sh = {in.channels, s.size, s.size};
    else if (s.kind == AugmentStep::Kind::resize) out_sh = resize_shape(in, s.size);
    uint8_t* out = dst;
    if (k + (fuse_flip ? 2 : 1) < steps_.size()) {
      bufs[next_buf]->resize(static_cast<size_t>(out_sh.numel()));
      out = bufs[next_buf]->data();
      next_buf ^= 1;
    }
    switch (s.kind) {
      case AugmentStep::Kind::crop: {
        const AugmentDraw d = augment_draw(s, static_cast<int>(k), seed_, epoch, g, in);
        crop_padded(cur, out, in, s.pad, d.top, d.left);
        break;
      }
      case AugmentStep::Kind::hflip: {
        const AugmentDraw d = augment_draw(s, static_cast<int>(k), seed_, epoch, g, in);
        if (d.flip) flip_horizontal(cur, out, in);
        else std::memcpy(out, cur, static_cast<size_t>(in.numel()));
        break;
      }
      case AugmentStep::Kind::rrc: {
        const AugmentDraw d = augment_draw(s, static_cast<int>(k), seed_, epoch, g, in);
        const bool flip =
            fuse_flip && augment_draw(steps_[k + 1], static_cast<int>(k + 1), seed_, epoch, g, out_sh).flip;
        resized_crop(cur, out, in, d.top, d.left, d.h, d.w, s.size, flip);
        break;
      }
      case AugmentStep::Kind::center: center_crop_planes(cur, out, in, s.size); break;
      case AugmentStep::Kind::resize: resize_planes(cur, out, in, s.size); break;
      case AugmentStep::Kind::flip3d:
      case AugmentStep::Kind::transpose3d: internal_error("a volume step in an image pipeline");
    }
    cur = out;
    in = out_sh;
    if (fuse_flip) ++k;
  }
}

}  // namespace cnnscale

namespace cnnscale {

void Augmenter::check_label_maps(int fill) const {
  for (const AugmentStep& s : steps_) {
    if (s.volume()) continue;  // voxels move with their label
    if (s.kind != AugmentStep::Kind::hflip && s.kind != AugmentStep::Kind::crop)
      fail("--augment step ", s.name, " resamples the image, which a label map cannot follow pixel for pixel; a ",
           "segmentation data set takes hflip and crop<S>pad<P> (resize or crop the images and label maps alike ",
           "before prep)");
    if (s.kind == AugmentStep::Kind::crop && s.pad > 0 && fill < 0)
      fail("--augment ", s.name, " pads the image by ", s.pad, " pixels, and its label map's padded pixels need a ",
           "label that counts nowhere: pass --ignore-index N (a label the data set does not use; torchvision's ",
           "segmentation reference pads with 255), or use crop<S>pad0 or hflip only");
  }
}

void augment_label_map(const Augmenter& a, int32_t* map, int epoch, int64_t g, int32_t fill,
                       std::vector<int32_t>& scratch) {
  if (a.volume()) {
    apply_volume_steps(a, map, 1, epoch, g, scratch);
    return;
  }
  const SampleShape in = a.input_shape();
  const int H = in.height, W = in.width;
  for (size_t k = 0; k < a.steps().size(); ++k) {
    const AugmentStep& s = a.steps()[k];
    const AugmentDraw d = a.draw(k, epoch, g, in);
    if (s.kind == AugmentStep::Kind::hflip) {
      if (d.flip)
        for (int y = 0; y < H; ++y) std::reverse(map + int64_t{y} * W, map + int64_t{y + 1} * W);
    } else if (s.kind == AugmentStep::Kind::crop) {  // as crop_padded: dst(y, x) = src(y + dy, x + dx)
      scratch.assign(map, map + int64_t{H} * W);
      const int dy = d.top - s.pad, dx = d.left - s.pad;
      for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x) {
          const int sy = y + dy, sx = x + dx;
          map[int64_t{y} * W + x] =
              sy >= 0 && sy < H && sx >= 0 && sx < W ? scratch[static_cast<size_t>(int64_t{sy} * W + sx)] : fill;
        }
    } else {
      internal_error("augment_label_map: step ", s.name, " (check_label_maps refuses it)");
    }
  }
}

}  // namespace cnnscale
