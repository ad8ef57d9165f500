// fuzz_shard.cpp — libFuzzer target: a data set's shard file as cnnscale opens and reads it
// (data/dataset.hpp, hdf5_source.hpp): load_dataset() (dataset.json against the shard: its
// /images dims and type, /labels, /targets, a ragged shard's /offsets and /shapes, the shard
// digest over its chunk list), then verify_dataset() (every chunk through HDF5 and through
// the /chunk_addresses list), one epoch of the training reader (the direct chunk reader, or
// HDF5's path with --cache) and the evaluation reader over the whole split.
//
// Input: byte 0 picks one of the data sets below (real `cnnscale prep` outputs of 6 tiny
// samples, one train shard, 2 samples a chunk: its dataset.json is kept here, less the
// "source" paths), byte 1 holds options, the rest is the shard file, written to a
// directory of this process (in /dev/shm) beside that dataset.json. Seeds: corpus/fuzz_shard/,
// each the kind byte, 0 and prep's shard bytes.
//
// The digest: dataset.json records each shard's SHA-256 (shard_digest.hpp), which
// load_dataset() compares with the one it computes from the shard after checking it, so a
// recorded digest refuses every mutated shard before verify_dataset() and the readers run.
// A hostile but consistent writer records the digest of the shard it wrote; dataset.json
// without a digest (an older prep's, which load_dataset() accepts as unbound) has the same
// effect and runs the same code — every check before the comparison, the digest itself,
// then every reader. So this target writes dataset.json without it, except when the low 3
// bits of byte 1 are all set (1 input in 8): then prep's recorded digest stays, for the
// comparison and its message.
//
// What it asserts: every refusal is a UserError; a data set that loads has the counts
// dataset.json says, every batch its promised size, class labels (and label maps) in
// [0, classes), finite regression targets; the evaluation reader yields each sample once;
// no HDF5 object is left open afterwards. Anything else escaping, a crash, a hang, a leak
// or a sanitizer report is a defect (libhdf5's own crashes: tests/fuzz/hdf5-crashes/).
#include <hdf5.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "data/dataset.hpp"
#include "data/hdf5_source.hpp"
#include "util/error.hpp"
#include "util/hdf5_lock.hpp"

namespace {

using cnnscale::TaskKind;

// `cnnscale prep --shards 1 --test-shards 1 --chunk 2` of 6 samples, "source" left out. Input:
// an h5py file of 6 random samples (x: uint8 6×1×4×4, f32: float32, i16: int16, vol: uint8
// 6×1×2×3×3) with y (int64 labels 0..2), seg (6×4×4 label maps 0..2), t (float32 6×2);
// --format hdf5 --images /x --labels /y (fixed; gzip: --compress gzip; segmentation:
// --labels /seg; regression: --targets /t; float32: --images /f32; int16: --images /i16
// --targets /t; volume: --images /vol), and an image folder of 2 classes × 3 random PNGs of
// 2..6 pixels a side: --format imagefolder --store original-max 6 (ragged), --store jpeg 6.
// Index = byte 0 of the input, modulo the count.
struct Kind {
  const char* name;
  const char* json;
};
const Kind kKinds[] = {
    {"fixed",
     R"({"checksum":"fletcher32","chunk_samples":2,"classes":3,"compression":"none","dtype":"uint8","format":"cnnscale-dataset","label_dtype":"int32","layout":"NCHW","normalization":{"computed_on":"train","mean":[0.5222222222222223],"pixel_scale":"x / 255","std":[0.2976270297898847]},"sample_shape":[1,4,4],"splits":{"train":{"samples":6,"shards":[{"digest":"sha256:f1e175f27ac66722679a9ed6ae1b043d8490630b890b436fa5cd4ee451231394","file":"train-00000-of-00001.h5","first_index":0,"samples":6}]}},"task":"classification","version":1})"},
    {"gzip",
     R"({"checksum":"fletcher32","chunk_samples":2,"classes":3,"compression":"gzip","dtype":"uint8","format":"cnnscale-dataset","label_dtype":"int32","layout":"NCHW","normalization":{"computed_on":"train","mean":[0.5222222222222223],"pixel_scale":"x / 255","std":[0.2976270297898847]},"sample_shape":[1,4,4],"splits":{"train":{"samples":6,"shards":[{"digest":"sha256:f02cfe9473d96ef5c29accd24c219463e066667320c9a2b487e21b3fc9c2a94e","file":"train-00000-of-00001.h5","first_index":0,"samples":6}]}},"task":"classification","version":1})"},
    {"segmentation",
     R"({"checksum":"fletcher32","chunk_samples":2,"classes":3,"compression":"none","dtype":"uint8","format":"cnnscale-dataset","label_dtype":"int32","layout":"NCHW","normalization":{"computed_on":"train","mean":[0.5222222222222223],"pixel_scale":"x / 255","std":[0.2976270297898847]},"sample_shape":[1,4,4],"splits":{"train":{"samples":6,"shards":[{"digest":"sha256:c602e299a39737fc7d0b44f74055df1a213e14f2dfe81391d413c35cd0eb505f","file":"train-00000-of-00001.h5","first_index":0,"samples":6}]}},"task":"segmentation","version":1})"},
    {"regression",
     R"({"checksum":"fletcher32","chunk_samples":2,"compression":"none","dtype":"uint8","format":"cnnscale-dataset","layout":"NCHW","normalization":{"computed_on":"train","mean":[0.5222222222222223],"pixel_scale":"x / 255","std":[0.2976270297898847]},"sample_shape":[1,4,4],"splits":{"train":{"samples":6,"shards":[{"digest":"sha256:7ca9b47a77fc30cdc1b08b9d5c715e4ea04c5d9487bc01ca060c8bd5c4d01de3","file":"train-00000-of-00001.h5","first_index":0,"samples":6}]}},"target_dtype":"float32","targets":2,"task":"regression","version":1})"},
    {"float32",
     R"({"checksum":"fletcher32","chunk_samples":2,"classes":3,"compression":"none","dtype":"float32","format":"cnnscale-dataset","label_dtype":"int32","layout":"NCHW","normalization":{"computed_on":"train","mean":[-0.08429133805111633],"pixel_scale":"x","std":[0.9209659041844546]},"sample_shape":[1,4,4],"splits":{"train":{"samples":6,"shards":[{"digest":"sha256:8c478dbeb5a40b65443f759dd15f87b7dec102fe72ca2be61587720e8644bd17","file":"train-00000-of-00001.h5","first_index":0,"samples":6}]}},"task":"classification","transform":"none","version":1})"},
    {"int16",
     R"({"checksum":"fletcher32","chunk_samples":2,"compression":"none","dtype":"int16","format":"cnnscale-dataset","layout":"NCHW","normalization":{"computed_on":"train","mean":[0.041666666666666664],"pixel_scale":"x","std":[59.59217591727588]},"sample_shape":[1,4,4],"splits":{"train":{"samples":6,"shards":[{"digest":"sha256:25c2284694649ea5d757a231cbf9ef703028f52e185ef9e88d49696c6f635d60","file":"train-00000-of-00001.h5","first_index":0,"samples":6}]}},"target_dtype":"float32","targets":2,"task":"regression","transform":"none","version":1})"},
    {"volume",
     R"({"checksum":"fletcher32","chunk_samples":2,"classes":3,"compression":"none","dtype":"uint8","format":"cnnscale-dataset","label_dtype":"int32","layout":"NCDHW","normalization":{"computed_on":"train","mean":[0.558242556281772],"pixel_scale":"x / 255","std":[0.28829694913371573]},"sample_shape":[1,2,3,3],"splits":{"train":{"samples":6,"shards":[{"digest":"sha256:866976730ae8cbc709eb05802edf21ecb926f7777b407c4df6cba86d1a0e8daf","file":"train-00000-of-00001.h5","first_index":0,"samples":6}]}},"task":"classification","version":1})"},
    {"ragged",
     R"({"checksum":"fletcher32","chunk_samples":2,"class_names":["a","b"],"classes":2,"compression":"none","dtype":"uint8","format":"cnnscale-dataset","label_dtype":"int32","layout":"NCHW","max_side":6,"normalization":{"computed_on":"train","mean":[0.4876439464674759,0.5017117958294429,0.47675070028011207],"pixel_scale":"x / 255","std":[0.27156407908556013,0.29127823147360055,0.3009017076224273]},"sample_layout":"ragged","sample_shape":[3,6,6],"splits":{"train":{"samples":6,"shards":[{"digest":"sha256:202818e82dd5e0a77c29434d25bf81df47b969a2ec61b3abe407f08b27ca5947","file":"train-00000-of-00001.h5","first_index":0,"samples":6}]}},"task":"classification","version":1})"},
    {"jpeg",
     R"({"checksum":"fletcher32","chunk_samples":2,"class_names":["a","b"],"classes":2,"compression":"none","dtype":"uint8","format":"cnnscale-dataset","label_dtype":"int32","layout":"NCHW","max_side":6,"normalization":{"computed_on":"train","mean":[0.48776844070961717,0.5023342670401494,0.47911609088079676],"pixel_scale":"x / 255","std":[0.21795141229345671,0.208352486519762,0.20545348562750826]},"sample_layout":"jpeg","sample_shape":[3,6,6],"splits":{"train":{"samples":6,"shards":[{"digest":"sha256:d6b4b7426e8d561c9dd968619c1dd05c9b4b12bffe5d090530012f90251c78e8","file":"train-00000-of-00001.h5","first_index":0,"samples":6}]}},"task":"classification","version":1})"},
};
constexpr size_t kKindCount = sizeof kKinds / sizeof kKinds[0];

// Byte 1.
constexpr uint8_t kKeepDigest = 0x07;  // all three: dataset.json keeps prep's recorded digest
constexpr uint8_t kCache = 0x08;       // --cache: the training reader reads through HDF5, chunks kept
constexpr uint8_t kAugment = 0x10;     // the kind's random --augment list instead of its plain one
constexpr uint8_t kJpegExact = 0x20;   // --jpeg-decode exact

std::string g_dir;  // this process's data set directory

// HDF5 objects of any file (files, groups, datasets, named types, attributes) open before
// the first input (none) and after each: a handle the readers leave open is a defect (and
// would keep the file open under the next input's bytes). HDF5 1.10 counts no dataspaces or
// property lists for callers (H5Inmembers refuses the library's types).
ssize_t g_baseline = 0;

ssize_t open_objects() { return H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL); }

void remove_dir() {
  if (g_dir.empty()) return;
  ::unlink((g_dir + "/dataset.json").c_str());
  ::unlink((g_dir + "/train-00000-of-00001.h5").c_str());
  ::rmdir(g_dir.c_str());
}

void write_file(const std::string& path, const void* p, size_t n) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (n > 0 && std::fwrite(p, 1, n, f) != n) || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
}

[[noreturn]] void defect(const char* what) {
  std::fprintf(stderr, "fuzz_shard: %s\n", what);
  std::abort();
}

void check_batch(const cnnscale::DatasetInfo& info, const cnnscale::Batch& b, int64_t count, int64_t numel) {
  if (b.count != count || static_cast<int64_t>(b.images.size()) != count * numel) defect("batch of the wrong size");
  if (info.task == TaskKind::classification || info.task == TaskKind::segmentation) {
    if (static_cast<int64_t>(b.labels.size()) != count * info.label_pixels()) defect("labels of the wrong size");
    for (int32_t l : b.labels)
      if (l < 0 || l >= info.classes) defect("a label outside [0, classes) reached a batch");
  } else {
    if (static_cast<int64_t>(b.targets.size()) != count * info.targets) defect("targets of the wrong size");
    for (float t : b.targets)
      if (!std::isfinite(t)) defect("a non-finite target reached a batch");
  }
}

void run(const Kind& kind, uint8_t flags) {
  const std::shared_ptr<const cnnscale::DatasetInfo> info =
      std::make_shared<const cnnscale::DatasetInfo>(cnnscale::load_dataset(g_dir));
  if (info->train.samples != 6 || info->train.shards.size() != 1 || info->test.samples != 0)
    defect("load_dataset() accepted counts dataset.json does not say");
  cnnscale::verify_dataset(*info);

  const std::string name = kind.name;
  const bool aug = flags & kAugment;
  std::string augment;
  if (name == "ragged" || name == "jpeg") augment = aug ? "rrc4,hflip" : "center4";
  else if (name == "volume") augment = aug ? "flip3d" : "";
  else if (info->dtype == cnnscale::SampleType::u8) augment = aug ? "hflip" : "";

  cnnscale::ReaderOptions o;
  o.batch_per_rank = 2;
  o.seed = flags;
  o.prefetch = 0;  // no thread: produce() runs inside next()
  o.threads = 1;
  o.cache_memory = flags & kCache;
  o.augment = augment;
  o.jpeg_exact = flags & kJpegExact;
  {
    auto src = cnnscale::make_hdf5_train_source(info, o, 0, 1);
    const int64_t numel = src->shape().numel();
    src->seek(0, 0);
    cnnscale::Batch b;
    for (int64_t s = 0; s < src->steps_per_epoch(); ++s) {
      src->next(b);
      check_batch(*info, b, 2, numel);
    }
  }
  auto eval = cnnscale::make_hdf5_eval_source(info, "train", 0, 1, augment, 1);
  cnnscale::Batch b;
  int64_t seen = 0;
  // Evaluation's transform of center4 and rrc4 is center4: C×4×4 (ragged); none, else.
  const int64_t numel = info->ragged ? info->shape.channels * 4 * 4 : info->shape.numel();
  while (eval->next(b, 4)) {
    if (b.count < 1 || b.count > 4) defect("evaluation batch of the wrong size");
    check_batch(*info, b, b.count, numel);
    seen += b.count;
  }
  if (seen != info->train.samples) defect("the evaluation reader did not yield each sample once");
}

}  // namespace

// Leaks whose allocation passes through libhdf5 are libhdf5's own (1.10.8 loses an object
// header on some damaged files: tests/fuzz/hdf5-crashes/README.md) and are not reported; a
// handle cnnscale leaves open is not a leak (HDF5 keeps it) but an open object, checked below.
extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5\n"; }
extern "C" const char* __lsan_default_options() { return "print_suppressions=0"; }
// libhdf5 allocates what a damaged file's sizes say (a local heap of 2^62 bytes): malloc()
// returning NULL, as it does outside ASan, and HDF5's error is the answer. C++'s operator new
// (cnnscale's allocations) is still reported.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/dev/shm/fuzz_shard-XXXXXX";
  char tmpl2[] = "/tmp/fuzz_shard-XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  if (!d) d = ::mkdtemp(tmpl2);
  if (!d) {
    std::perror("mkdtemp");
    std::abort();
  }
  g_dir = d;
  std::atexit(remove_dir);
  cnnscale::Hdf5Lock lock(cnnscale::hdf5_mutex());
  H5open();
  g_baseline = open_objects();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > (1 << 20)) return -1;
  const Kind& kind = kKinds[data[0] % kKindCount];
  const uint8_t flags = data[1];
  nlohmann::json j = nlohmann::json::parse(kind.json);
  if ((flags & kKeepDigest) != kKeepDigest) j["splits"]["train"]["shards"][0].erase("digest");
  const std::string text = j.dump(2);
  write_file(g_dir + "/dataset.json", text.data(), text.size());
  write_file(g_dir + "/train-00000-of-00001.h5", data + 2, size - 2);
  try {
    run(kind, flags);
  } catch (const cnnscale::UserError& e) {
    if (std::getenv("FUZZ_SHARD_VERBOSE")) std::fprintf(stderr, "fuzz_shard: %s: %s\n", kind.name, e.what());
  }
  // Every file, group, dataset and attribute the readers opened is closed again.
  {
    cnnscale::Hdf5Lock lock(cnnscale::hdf5_mutex());
    if (const ssize_t open = open_objects(); open != g_baseline) {
      std::fprintf(stderr, "fuzz_shard: %zd HDF5 object(s) left open (%zd before)\n", open, g_baseline);
      std::abort();
    }
  }
  return 0;
}
