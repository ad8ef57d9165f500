// augment.hpp — on-the-fly training augmentation (`cnnscale train --augment LIST`): a
// pipeline of uint8 image transforms that the reader thread applies to each training
// sample before Normalize. Evaluation gets no random step (see below).
//
// LIST is comma-separated step names, applied left to right ("" or "none": no step):
//   crop<S>pad<P>  torchvision RandomCrop(S, padding=P) with its defaults (fill 0,
//                  padding_mode "constant"): the C×H×W image is padded with P zero pixels
//                  on every side to (H+2P)×(W+2P), and the S×S window whose top-left
//                  corner is (top, left) in the padded image is kept, top uniform in
//                  [0, H+2P-S] and left uniform in [0, W+2P-S]. S must equal H and W (the
//                  sample shape does not change), e.g. crop32pad4 on CIFAR's 32×32.
//   hflip          torchvision RandomHorizontalFlip(p=0.5): with probability 1/2, column x
//                  of every channel becomes column W-1-x.
//   rrc<S>         torchvision RandomResizedCrop(S) with its defaults (scale (0.08, 1),
//                  ratio (3/4, 4/3), bilinear with antialias): get_params' ten tries — area
//                  fraction uniform in scale, log aspect ratio uniform in log(ratio),
//                  w = round(sqrt(area·ratio)), h = round(sqrt(area/ratio)), accepted when
//                  0 < w <= W and 0 < h <= H, then top uniform in [0, H-h], left in [0, W-w];
//                  else the fallback central crop — then the h×w window is resized to S×S
//                  by PIL's bilinear resample. The sample becomes C×S×S.
//   center<S>      torchvision CenterCrop(S) (zero padding when the image is smaller);
//                  no randomness. The sample becomes C×S×S.
//   resize<S>      torchvision Resize(S) (shorter side to S, the longer int(S·long/short),
//                  PIL bilinear with antialias, each channel plane alike); no randomness.
// Volumes (C×D×H×W samples of any dtype: CosmoFlow's, a 3-D U-Net's) take their own steps,
// applied to the normalised float32 sample (they move voxels within each channel, so they
// commute with the per-channel normalisation: the same numbers as before it):
//   flip3d         each spatial axis D, H, W reversed with probability 1/2, independently
//                  (np.flip(x, axis) per drawn axis; CosmoFlow's random flips).
//   transpose3d    the spatial axes permuted by one of the 6 permutations, uniform
//                  (np.transpose(x, (0, 1+p0, 1+p1, 1+p2)); CosmoFlow's random
//                  transposes); cube volumes only (D = H = W: the shape must not change).
// The image steps refuse volumes and the volume steps images. A label map per volume moves
// with its volume (augment_label_map), voxel for voxel.
// Evaluation applies the deterministic counterpart of the list: center<S> for rrc<S> and
// center<S> steps, resize<S> kept, nothing for crop and hflip, so test samples get the
// training shape (for rrc224 on 256×256 prepped images: CenterCrop(224), ImageNet's
// evaluation). On variable-size data (ragged, `prep --store original-max`) rrc<S>
// becomes resize<⌊S/0.875⌋>,center<S> — torchvision's ImageNet reference evaluation
// (Resize(256), CenterCrop(224) for S = 224).
//
// Variable-size (ragged) input: Augmenter(list, max_shape, seed, /*ragged=*/true) takes
// per-sample shapes in apply(). Only resize<S>, rrc<S> and center<S> accept a
// variable-size image; crop and hflip need a fixed size, so they must come after an
// rrc<S> or center<S>, and the list must end fixed-size (else a UserError naming the fix).
// The zero padding is pixel value 0 before Normalize, as in torchvision's
// [RandomCrop, RandomHorizontalFlip, ToTensor, Normalize] recipe.
//
// Randomness: the draws of step k for global sample g in epoch e are a pure function of
// (seed, e, g, k) (splitmix64's finaliser, then SplitMix64::below for unbiased bounded
// integers) — never of the rank, the world size, the batch, the prefetch depth or the
// thread — so W ranks × B samples see the same augmented images as 1 rank × W·B, and a
// resumed run re-draws exactly what the uninterrupted run drew.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/batch_source.hpp"

namespace cnnscale {

// The largest size an --augment step takes (resize<S>: twice that, since rrc<S>'s
// evaluation resizes to S / 0.875 first).
constexpr int kMaxAugmentSide = 65535;
// The largest sample (bytes: uint8 C×H×W) an --augment step may make, the last or one before
// it: 256 MiB (3×9459×9459), beyond any CNN input, and held per reader thread.
constexpr int64_t kMaxAugmentSampleBytes = int64_t{256} << 20;

struct AugmentStep {
  enum class Kind { crop, hflip, rrc, center, resize, flip3d, transpose3d };
  bool volume() const { return kind == Kind::flip3d || kind == Kind::transpose3d; }
  Kind kind = Kind::hflip;
  int size = 0, pad = 0;  // crop: size and pad; rrc, center, resize: size
  std::string name;       // as written, e.g. "crop32pad4"
};

// One line for --help and error messages: the valid step names.
std::string augment_valid_names();

// Parses LIST. Throws UserError naming a bad step and listing the valid ones.
std::vector<AugmentStep> parse_augment(const std::string& list);

// What step k drew for one sample: the crop window's top-left corner in the padded
// image (crop), whether the image is flipped (hflip), the window top, left, h, w (rrc).
struct AugmentDraw {
  int top = 0, left = 0, h = 0, w = 0;
  bool flip = false;
  int axes = 0;  // flip3d: bit 0 D, bit 1 H, bit 2 W reversed; transpose3d: the permutation (0..5,
                 // lexicographic: 0 = (0,1,2) none, 5 = (2,1,0))
};

// The volume geometry, exposed for tests: dst(c, i0, i1, i2) = src(c, j) with
// j[perm[a]] = flip[a] ? n_a − 1 − i_a : i_a (n_a = dims[perm[a]]), for C channels of
// dims[0]×dims[1]×dims[2] (D×H×W). src and dst not aliased.
template <class T>
void permute_flip_volume(const T* src, T* dst, int channels, const int dims[3], const int perm[3], const bool flip[3]);

// The draw of `step` (at position k of the pipeline) for sample g of epoch e; `shape` is
// the sample's shape when the step runs.
AugmentDraw augment_draw(const AugmentStep& step, int k, uint64_t seed, int epoch, int64_t g, SampleShape shape);

// The geometry, exposed for tests. src and dst are shape.numel() bytes, not aliased.
// crop_padded: dst(c, y, x) = src(c, y + top - pad, x + left - pad), or 0 outside src.
void crop_padded(const uint8_t* src, uint8_t* dst, SampleShape shape, int pad, int top, int left);
void flip_horizontal(const uint8_t* src, uint8_t* dst, SampleShape shape);
// Window (top, left, h, w) of a C×H×W sample resized to C×size×size (PIL bilinear),
// mirrored left-right when `flip` (hflip after it, in the same pass).
void resized_crop(const uint8_t* src, uint8_t* dst, SampleShape shape, int top, int left, int h, int w, int size,
                  bool flip = false);
// torchvision CenterCrop(size) of a C×H×W sample into C×size×size.
void center_crop_planes(const uint8_t* src, uint8_t* dst, SampleShape shape, int size);
// torchvision Resize(size) output shape of a C×H×W sample (shorter side to size).
SampleShape resize_shape(SampleShape shape, int size);
// torchvision Resize(size) of a C×H×W sample into resize_shape(shape, size).
void resize_planes(const uint8_t* src, uint8_t* dst, SampleShape shape, int size);

class Augmenter;
// Segmentation: moves a sample's H×W label map (int32) as apply() moves its image, with
// the same draws: hflip mirrors it, crop<S>pad<P> shifts it, the padded pixels taking
// `fill`. Only those two steps (Augmenter::check_label_maps); `scratch` is the caller's.
// A volume's D×H×W label map: flip3d and transpose3d as apply_volume() moves the volume.
void augment_label_map(const Augmenter& a, int32_t* map, int epoch, int64_t g, int32_t fill,
                       std::vector<int32_t>& scratch);

class Augmenter {
 public:
  Augmenter() = default;  // no steps: apply() copies
  // Throws UserError when LIST is bad or a step does not fit `shape` (naming the fix).
  // ragged: samples have variable H×W (at most shape's); see above.
  Augmenter(const std::string& list, SampleShape shape, uint64_t seed, bool ragged = false);
  bool active() const { return !steps_.empty(); }
  const std::vector<AugmentStep>& steps() const { return steps_; }
  SampleShape input_shape() const { return shape_; }
  SampleShape output_shape() const { return out_shape_; }
  // The evaluation pipeline of this list (see above), on the same input shape.
  Augmenter for_evaluation() const;
  // Writes the augmented sample g of `epoch` (input_shape().numel() bytes) into dst
  // (output_shape().numel() bytes; not aliased). `scratch` is the caller's (per thread)
  // working buffer.
  void apply(const uint8_t* src, uint8_t* dst, int epoch, int64_t g, std::vector<uint8_t>& scratch) const;
  // The same for a sample of shape `in` (ragged data; in.channels == input_shape().channels).
  void apply(const uint8_t* src, SampleShape in, uint8_t* dst, int epoch, int64_t g,
             std::vector<uint8_t>& scratch) const;
  bool ragged() const { return ragged_; }
  // A list of volume steps (flip3d, transpose3d): apply_volume() runs it, on the normalised
  // float32 sample in place, after Normalize (apply() is for images).
  bool volume() const { return volume_; }
  void apply_volume(float* x, int epoch, int64_t g, std::vector<float>& scratch) const;
  // Segmentation data: throws UserError unless every step is hflip or crop<S>pad<P> (the
  // steps that move a label map pixel for pixel), and for a padded crop without a fill
  // label (fill < 0: no --ignore-index).
  void check_label_maps(int fill) const;
  // The draw of step k for sample g of `epoch` on an image of shape `in` (what apply() uses).
  AugmentDraw draw(size_t k, int epoch, int64_t g, SampleShape in) const {
    return augment_draw(steps_[k], static_cast<int>(k), seed_, epoch, g, in);
  }
  // apply() from step `first` on: src is what the steps before it made (shape `in`);
  // first == steps().size() copies src. (The JPEG reader runs the first rrc<S> itself,
  // on a DCT-scaled decode: hdf5_source.cpp.)
  void apply_from(size_t first, const uint8_t* src, SampleShape in, uint8_t* dst, int epoch, int64_t g,
                  std::vector<uint8_t>& scratch) const;

 private:
  std::vector<AugmentStep> steps_;
  std::vector<SampleShape> shapes_;  // shape entering each step
  SampleShape shape_, out_shape_;
  uint64_t seed_ = 0;
  bool ragged_ = false;
  bool volume_ = false;  // the steps are volume steps
};

}  // namespace cnnscale
