// task_kind.hpp — what a data set's targets are: what dataset.json records (data/) and
// what the loss and metrics are chosen by (nn/task.hpp). Here because both modules
// name it and neither includes the other.
#pragma once
#include <string>

namespace cnnscale {

enum class TaskKind {
  classification,  // one class index per sample (int32)
  regression,      // K float targets per sample
  multilabel,      // K 0/1 targets per sample
  segmentation,    // one class index per pixel (a label map)
};

inline const char* task_name(TaskKind k) {
  switch (k) {
    case TaskKind::classification: return "classification";
    case TaskKind::regression: return "regression";
    case TaskKind::multilabel: return "multilabel";
    case TaskKind::segmentation: return "segmentation";
  }
  return "?";
}

// false for an unknown name.
inline bool parse_task(const std::string& s, TaskKind* out) {
  for (TaskKind k : {TaskKind::classification, TaskKind::regression, TaskKind::multilabel, TaskKind::segmentation})
    if (s == task_name(k)) return *out = k, true;
  return false;
}

}  // namespace cnnscale
