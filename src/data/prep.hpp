// prep.hpp — `cnnscale prep`: converts IDX files, an HDF5 file or the CIFAR-10/100
// binary files (prep_cifar.hpp) or a folder of JPEG/PNG class folders
// (prep_imagefolder.hpp) into a sharded
// dataset directory (shards + dataset.json, see docs/data.md). Everything is written
// into "<output>.tmp-<pid>" next to the output and renamed into place at the end, so
// an interrupted prep never leaves a directory that looks complete.
//
// Stopped (issue 39): once that directory exists (with PrepOptions::stop_on_signals),
// SIGTERM, SIGUSR1 and SIGINT (unless ignored) set a flag (util/stop_signal.hpp) that the
// writing loop reads between blocks of samples; prep then removes the directory and throws
// PrepStopped, saying what it was writing (it ended with status 143, no message and the
// directory left behind). A second signal before then, 1 s or more after the first (a second
// Ctrl-C), ends prep at once, the default way (it waited for the next block: review of
// issue 39), leaving what a SIGKILL leaves; one within the second is the same stop
// delivered twice (util/stop_signal.hpp). What a SIGKILL or a crash leaves ("<output>.tmp-<pid>", or
// "<output>.old-<pid>" of an interrupted --force) is named by the next prep of that output
// when no process <pid> runs on this host — named, not removed: on a shared file system
// the writer may be a prep on another node.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "data/prep_imagefolder.hpp"
#include "util/error.hpp"

namespace cnnscale {

struct PrepOptions {
  std::string format = "idx";   // idx | hdf5 | cifar10 | cifar100 | imagefolder
  std::string input;            // idx, cifar10/100, imagefolder: directory; hdf5: file
  std::string cifar100_labels;  // cifar100: fine (default) | coarse
  ImageFolderOptions image;     // imagefolder only (--resize, --center-crop, --val-fraction, ...)
  std::string output;
  // hdf5 format: dataset names inside --input (test split optional).
  std::string images, labels, test_images, test_labels;
  // hdf5 format, regression: float targets N or N×K instead of labels (--targets, --test-targets).
  std::string targets, test_targets;
  bool multilabel = false;  // --task multilabel: the targets are K labels of 0 or 1 each (else regression)
  // "log1p": the reader feeds log(1 + x) of int16/float16/float32 samples, mean and std are
  // those of log(1 + x) (CosmoFlow's counts); "none".
  std::string transform = "none";
  int shards = 8, test_shards = 2;
  std::string compress = "none";  // none | gzip
  int64_t chunk = 64;             // samples per /images chunk
  int classes = 0;                // 0: max label + 1
  bool force = false;
  // `cnnscale prep`: install the stop-signal handlers (below) once the temporary directory
  // exists. Other callers (tests, tools) keep their signal dispositions.
  bool stop_on_signals = false;
  std::function<void(const std::string&)> log;  // progress lines (may be empty)
};

struct PrepResult {
  std::string output;
  int64_t train_samples = 0, test_samples = 0;
  int classes = 0;          // regression: the targets per sample
  bool regression = false;  // --targets
  bool segmentation = false;  // --labels of label maps (N×H×W)
};

// A prep stopped by a signal; cmd_prep exits with 128 + signal(), as the signal would have.
class PrepStopped : public UserError {
 public:
  PrepStopped(const std::string& what, int sig) : UserError(what), signal_(sig) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

PrepResult run_prep(const PrepOptions& opts);

}  // namespace cnnscale
