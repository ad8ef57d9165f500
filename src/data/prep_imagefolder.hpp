// prep_imagefolder.hpp — `prep --format imagefolder`: a folder of class folders of
// JPEG/PNG files, read as torchvision.datasets.ImageFolder reads it, decoded once
// (image_decode.hpp) and optionally resized / center-cropped to one sample shape.
//
// Layout: ROOT/train/<class>/… and, optionally, ROOT/val/<class>/… (the test split), or
// ROOT/<class>/… with --val-fraction F carving a seeded test split out of it.
// Order (= ImageFolder's): classes are the sub-folder names sorted by byte value (label =
// position); within a class, files are found recursively (symlinks followed), sorted by
// (directory path, file name); only names ending (case-insensitively) in one of
// torchvision's IMG_EXTENSIONS count. .jpg/.jpeg/.png are decoded (by content); the other
// IMG_EXTENSIONS (.ppm .bmp .pgm .tif .tiff .webp) are an error naming the file (they would
// shift every later index relative to torchvision), other files are skipped.
// --val-fraction F (0 < F < 1): n_val = round(F·n) samples chosen by the first n_val
// positions of the sampler's permutation of [0, n) under (--seed, epoch 0); both splits
// keep the ImageFolder order.
// Every image must have the same size after --resize/--center-crop (else a UserError
// naming the first file that differs and the fix) — unless --store original-max S
// (store_max): each image keeps its own size, its longer side capped to S (when it is
// longer: torchvision Resize's max_size rule, long → S, short → int(S·short/long), PIL
// bilinear with antialias); not combinable with --resize/--center-crop.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/image_decode.hpp"
#include "data/prep_input.hpp"

namespace cnnscale {

struct ImageFolderOptions {
  int resize = 0;           // --resize S (0: off)
  int center_crop = 0;      // --center-crop S (0: off)
  double val_fraction = 0;  // --val-fraction F (0: off)
  uint64_t seed = 0;        // --seed: the val split
  int threads = 1;          // decoding threads
  int store_max = 0;        // --store original-max S / --store jpeg S (0: fixed-size samples)
  bool store_jpeg = false;  // --store jpeg S: each image's JPEG bytes (re-encoded when larger than S or not a JPEG)
  int64_t max_pixels = kDefaultMaxImagePixels;  // --max-image-pixels (0: no limit); image_decode.hpp
};

struct ImageFolderListing {
  std::vector<std::string> classes;
  std::vector<std::string> files;  // paths, in ImageFolder order
  std::vector<int32_t> labels;
};

// The ImageFolder listing of `dir` (dir/<class>/…). Throws UserError (no class folders,
// a class without images, an image type that is not decoded).
ImageFolderListing list_image_folder(const std::string& dir);

struct ImageFolderInput {
  std::string layout;                         // "train/val", "train", "split" or "all"
  std::unique_ptr<SampleStream> train, test;  // test may be null
};

ImageFolderInput open_imagefolder_input(const std::string& root, const ImageFolderOptions& opts);

}  // namespace cnnscale
