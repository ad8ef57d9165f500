// cmd_prep.cpp — `cnnscale prep`: converts IDX, HDF5 or CIFAR-10/100 binary files into a sharded
// HDF5 dataset directory (src/data/prep.hpp), or verifies one (--verify DIR).
// Runs as one process; no MPI.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "data/dataset.hpp"
#include "data/prep.hpp"
#include "launch/bootstrap.hpp"
#include "util/error.hpp"

namespace cnnscale::cli {

int cmd_prep(int argc, char** argv) {
  CommandSpec spec{
      "prep",
      "cnnscale prep --format idx|hdf5|cifar10|cifar100|imagefolder --input IN --output DIR [options]\n"
      "       cnnscale prep --verify DIR",
      "Converts a data set into the sharded HDF5 layout `cnnscale train --data DIR` reads: shards\n"
      "train-NNNNN-of-KKKKK.h5 and test-NNNNN-of-KKKKK.h5 (/images uint8 N×C×H×W, chunked, fletcher32;\n"
      "/labels int32) and dataset.json (counts, shape, classes, train-split mean/std, shard list).\n"
      "The output appears only when complete (written as DIR.tmp-PID, then renamed).\n"
      "--verify DIR re-reads every chunk of an existing data set and checks its checksums, its chunk lists and\n"
      "its declared sample layout (--store jpeg: every stored JPEG decodes).\n"
      "Formats (--format; docs/data.md has the details):\n"
      "  idx       MNIST-style IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] in --input\n"
      "  hdf5      datasets of one HDF5 file: uint8 images or int16/float16/float32 samples (--images) with\n"
      "            integer labels (--labels: one per sample, or N×H×W label maps: segmentation) or float\n"
      "            targets (--targets, regression)\n"
      "  cifar10   the CIFAR-10 binary version: --input is cifar-10-batches-bin/ (data_batch_{1..5}.bin,\n"
      "            test_batch.bin, batches.meta.txt) or its parent; 3×32×32, 10 named classes\n"
      "  cifar100  the CIFAR-100 binary version: --input is cifar-100-binary/ (train.bin, test.bin,\n"
      "            fine_label_names.txt, coarse_label_names.txt) or its parent; --cifar100-labels fine|coarse\n"
      "  (the python/pickle CIFAR downloads are not read: use the binary ones)\n"
      "  imagefolder  torchvision ImageFolder layout: --input ROOT with ROOT/<class>/<file> (or ROOT/train/<class>/…\n"
      "            and ROOT/val/<class>/…); JPEG and PNG, converted to RGB as PIL's convert(\"RGB\");\n"
      "            --resize S, --center-crop S as torchvision's Resize(S), CenterCrop(S); --val-fraction F;\n"
      "            --store original-max S keeps each image's size (longer side <= S) for train --augment rrc<S>;\n"
      "            --store jpeg S keeps each image's JPEG bytes instead (re-encoded, quality 95, when its longer\n"
      "            side is above S or it is not a JPEG): ~1/5 of the disk, decoded by the reader threads",
      "Examples:\n"
      "  cnnscale prep --format idx --input /usr/share/datasets/fashion-mnist --output data/fmnist --shards 8\n"
      "  cnnscale prep --format hdf5 --input all.h5 --images /x_train --labels /y_train \\\n"
      "      --test-images /x_test --test-labels /y_test --output data/mine --shards 4\n"
      "  cnnscale prep --format cifar10 --input cifar-10-batches-bin --output data/cifar10 --shards 8\n"
      "  cnnscale prep --format imagefolder --input flowers --resize 64 --center-crop 64 --val-fraction 0.1 \\\n"
      "      --output data/flowers --threads 2\n"
      "  cnnscale prep --format imagefolder --input imagenet --store original-max 320 --threads 16 \\\n"
      "      --output data/imagenet\n"
      "  cnnscale prep --verify data/fmnist"};
  po::options_description desc("Options");
  desc.add_options()("format", po::value<std::string>()->default_value("idx"),
                     "input format: idx | hdf5 | cifar10 | cifar100 | imagefolder")(
      "input", po::value<std::string>(),
      "idx: directory with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; "
      "hdf5: the input file; cifar10/cifar100: the folder of .bin files or its parent")(
      "cifar100-labels", po::value<std::string>(), "cifar100: fine (100 classes, default) | coarse (20 superclasses)")(
      "resize", po::value<int>()->default_value(0),
      "imagefolder: shorter side to S, bilinear with antialias (torchvision Resize(S) on PIL images); 0: off")(
      "center-crop", po::value<int>()->default_value(0),
      "imagefolder: central S×S crop after --resize (torchvision CenterCrop(S)); 0: off")(
      "val-fraction", po::value<double>()->default_value(0.0),
      "imagefolder without a val/ folder: this fraction of the images (seeded by --seed) becomes the test split")(
      "seed", po::value<uint64_t>()->default_value(0), "imagefolder: seed of the --val-fraction split")(
      "threads", po::value<int>()->default_value(1), "imagefolder: decoding threads")(
      "store", po::value<std::vector<std::string>>()->multitoken(),
      "imagefolder: fixed (default: one size for all, see --resize/--center-crop) | original-max S (each image keeps "
      "its size, longer side capped to S; ragged layout for train --augment rrc<S>) | jpeg S (the same sizes, kept as "
      "JPEG bytes: re-encoded at quality 95 only when larger than S or not a JPEG; decoded by the reader)")(
      "max-image-pixels", po::value<int64_t>()->default_value(kDefaultMaxImagePixels),
      "imagefolder: refuse an image whose header claims more pixels (decompression-bomb guard; PIL's "
      "DecompressionBombError limit by default); 0: no limit")(
      "output", po::value<std::string>(), "dataset directory to create")("shards", po::value<int>()->default_value(8),
                                                                         "number of train shards")(
      "test-shards", po::value<int>()->default_value(2), "number of test shards")(
      "compress", po::value<std::string>()->default_value("none"), "none | gzip (level 4)")(
      "chunk", po::value<int64_t>()->default_value(64), "samples per HDF5 chunk of /images")(
      "classes", po::value<int>()->default_value(0), "number of classes (0: largest label + 1)")(
      "images", po::value<std::string>(),
      "hdf5: dataset of train samples, N×C×H×W or N×H×W: uint8 images, or int16/float16/float32 values kept as "
      "they are (science data; docs/data.md)")(
      "labels", po::value<std::string>(), "hdf5: dataset of train labels: integers, N (a classification data set) or N×H×W label maps of the "
      "images' H×W, a class per pixel (a segmentation data set)")(
      "targets", po::value<std::string>(),
      "hdf5: dataset of train targets (numbers, N or N×K, stored as float32) instead of --labels: a regression "
      "data set (train's default loss mse)")(
      "test-images", po::value<std::string>(), "hdf5: dataset of test samples (optional)")(
      "test-labels", po::value<std::string>(), "hdf5: dataset of test labels (with --labels)")(
      "test-targets", po::value<std::string>(), "hdf5: dataset of test targets (with --targets)")(
      "task", po::value<std::string>()->default_value("regression"),
      "with --targets: regression (any numbers; train's default loss mse) | multilabel (K labels of 0 or 1 per "
      "sample; train's default loss bce-with-logits, accuracy per label)")(
      "transform", po::value<std::string>()->default_value("none"),
      "none | log1p: int16/float16/float32 samples are fed as log(1 + x) (count data, as CosmoFlow), the "
      "normalisation statistics being those of log(1 + x); the stored values stay as they are")(
      "force", po::bool_switch(), "replace a non-empty --output")(
      "verify", po::value<std::string>(),
      "check an existing dataset directory (all shards, all checksums, the chunk lists, the sample layout)");
  auto parsed = parse_options(spec, argc, argv, desc);
  if (parsed.help) {
    print_help(spec, desc);
    return 0;
  }
  const auto& vm = parsed.vm;
  // prep is one process's job: when started as several tasks (srun -n 4 ...), the
  // launcher's rank 0 does it and the others leave at once.
  if (launcher_rank_or_zero() != 0) return 0;
  auto log = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  if (vm.count("verify")) {
    const std::string dir = vm["verify"].as<std::string>();
    DatasetInfo info = load_dataset(dir);
    if (const std::string w = unbound_warning(info); !w.empty())
      std::fprintf(stderr, "cnnscale: warning: %s\n", w.c_str());
    int64_t last = 0;
    verify_dataset(info, [&](int64_t done, int64_t total) {
      if (total >= 10000 && done * 10 / total != last) {
        last = done * 10 / total;
        if (done < total) log("verify: " + std::to_string(done) + "/" + std::to_string(total) + " samples");
      }
    });
    std::printf("verify: %s is complete: %lld train + %lld test samples in %zu + %zu shards, %d classes, all "
                "checksums match%s\n",
                info.dir.c_str(), static_cast<long long>(info.train.samples), static_cast<long long>(info.test.samples),
                info.train.shards.size(), info.test.shards.size(), info.classes,
                info.unbound_shards ? "" : ", every shard the one dataset.json records");
    return 0;
  }
  PrepOptions o;
  o.format = vm["format"].as<std::string>();
  if (vm.count("input")) o.input = vm["input"].as<std::string>();
  if (vm.count("output")) o.output = vm["output"].as<std::string>();
  for (auto [key, dst] : {std::pair{"images", &o.images}, std::pair{"labels", &o.labels},
                          std::pair{"test-images", &o.test_images}, std::pair{"test-labels", &o.test_labels},
                          std::pair{"targets", &o.targets}, std::pair{"test-targets", &o.test_targets}})
    if (vm.count(key)) *dst = vm[key].as<std::string>();
  o.transform = vm["transform"].as<std::string>();
  {
    const std::string t = vm["task"].as<std::string>();
    if (t != "regression" && t != "multilabel") fail("--task ", t, " is not regression or multilabel");
    o.multilabel = t == "multilabel";
  }
  if (o.format == "idx" && (!o.images.empty() || !o.labels.empty() || !o.test_images.empty()))
    fail("--images/--labels/--test-images/--test-labels belong to --format hdf5; --format idx finds the files itself");
  if (vm.count("cifar100-labels")) o.cifar100_labels = vm["cifar100-labels"].as<std::string>();
  if ((o.format == "cifar10" || o.format == "cifar100" || o.format == "imagefolder") &&
      (!o.images.empty() || !o.labels.empty() || !o.test_images.empty()))
    fail("--images/--labels/--test-images/--test-labels belong to --format hdf5; --format ", o.format,
         " finds the files itself");
  o.image.resize = vm["resize"].as<int>();
  o.image.center_crop = vm["center-crop"].as<int>();
  o.image.val_fraction = vm["val-fraction"].as<double>();
  o.image.seed = vm["seed"].as<uint64_t>();
  o.image.threads = vm["threads"].as<int>();
  o.image.max_pixels = vm["max-image-pixels"].as<int64_t>();
  if (vm.count("store")) {
    const auto v = vm["store"].as<std::vector<std::string>>();
    std::string sz = v.size() == 2 ? v[1] : "";
    std::string kind = v.empty() ? "" : v[0];
    if (v.size() == 1 && kind.rfind("original-max=", 0) == 0) {
      sz = kind.substr(13);
      kind = "original-max";
    }
    if ((kind == "original-max" || kind == "jpeg") && !sz.empty() &&
        sz.find_first_not_of("0123456789") == std::string::npos && sz.size() < 6 && std::stoi(sz) > 0) {
      o.image.store_max = std::stoi(sz);
      o.image.store_jpeg = kind == "jpeg";
    } else if (!(kind == "fixed" && v.size() == 1)) {
      fail("--store takes 'fixed', 'original-max S' or 'jpeg S' with S a positive size in pixels (e.g. --store ",
           "original-max 320, --store jpeg 320)");
    }
  }
  o.shards = vm["shards"].as<int>();
  o.test_shards = vm["test-shards"].as<int>();
  o.compress = vm["compress"].as<std::string>();
  o.chunk = vm["chunk"].as<int64_t>();
  o.classes = vm["classes"].as<int>();
  o.force = vm["force"].as<bool>();
  o.log = log;
  o.stop_on_signals = true;
  PrepResult r;
  try {
    r = run_prep(o);
  } catch (const PrepStopped& e) {  // one error line, then the status the signal would have given
    print_error(e.what());
    return 128 + e.signal();
  }
  std::printf("prep: wrote %s: %lld train + %lld test samples, %d %s\n", r.output.c_str(),
              static_cast<long long>(r.train_samples), static_cast<long long>(r.test_samples), r.classes,
              r.regression ? (r.classes == 1 ? "target" : "targets")
              : r.segmentation ? "classes (label maps)"
                               : "classes");
  return 0;
}

}  // namespace cnnscale::cli
