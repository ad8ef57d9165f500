// prep_cifar.hpp — the CIFAR-10 and CIFAR-100 *binary* distributions as prep inputs
// (https://www.cs.toronto.edu/~kriz/cifar.html, "binary version").
//
// CIFAR-10 (cifar-10-batches-bin/): data_batch_1.bin … data_batch_5.bin (train, in that
// order), test_batch.bin, batches.meta.txt (the 10 class names, one a line). Each file is
// a sequence of 3073-byte records: 1 label byte (0..9), then 3072 pixel bytes — the
// 1024 red, then 1024 green, then 1024 blue values of a 32×32 image, rows top to bottom,
// each row left to right. That is exactly one C×H×W = 3×32×32 uint8 sample.
// CIFAR-100 (cifar-100-binary/): train.bin, test.bin, fine_label_names.txt (100 names),
// coarse_label_names.txt (20 names); 3074-byte records: coarse label byte (0..19), fine
// label byte (0..99), 3072 pixel bytes as above. `labels` picks which label is kept.
//
// `input` is the folder holding those files or its parent (holding cifar-10-batches-bin/
// or cifar-100-binary/). The python (pickle) distributions are refused with a message
// naming the binary one. A file whose size is not a whole number of records, or a label
// outside the format's range, is a UserError naming the file (and the record).
// The class-name files are optional; without them dataset.json has no class_names.
#pragma once
#include <memory>
#include <string>

#include "data/prep_input.hpp"

namespace cnnscale {

struct CifarInput {
  std::string dir;  // the folder the files were found in
  std::unique_ptr<SampleStream> train, test;
};

// variant: "cifar10" | "cifar100"; labels (cifar100 only): "fine" | "coarse".
CifarInput open_cifar_input(const std::string& input, const std::string& variant, const std::string& labels);

// Record sizes, for messages and tests.
constexpr int64_t kCifarPixels = 3 * 32 * 32;
constexpr int64_t kCifar10Record = 1 + kCifarPixels;   // 3073
constexpr int64_t kCifar100Record = 2 + kCifarPixels;  // 3074

}  // namespace cnnscale
