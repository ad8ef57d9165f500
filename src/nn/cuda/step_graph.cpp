// step_graph.cpp — see step_graph.hpp.
#include "nn/cuda/step_graph.hpp"

#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "nn/cuda/device_array.hpp"
#include "util/cuda/check.hpp"

namespace cnnscale::nn::cuda {

void StepGraphs::clear() {
  for (Entry& e : graphs_)
    if (e.exec) cudaGraphExecDestroy(e.exec);
  graphs_.clear();
  seen_.clear();
}

void StepGraphs::decline(const std::string& why) {
  if (declined_.empty()) declined_ = why;
}

void StepGraphs::fail(const std::string& why) {
  failed_ = true;
  failure_ = why;
  (void)cudaGetLastError();  // a capture's error is not sticky: clear it for the eager step
  std::cerr << "cnnscale: warning: the training step could not be captured into a CUDA graph (" << why
            << "); it runs without one (CNNSCALE_GPU_GRAPH=1 is not yet run on a GPU: docs/gpu.md)\n";
}

namespace {
// A captured allocation or free (a library's cudaMallocAsync / cudaFreeAsync on the stream):
// a graph whose allocation is not freed inside it fails its second launch, which would end
// the job (replays are not under CaptureScope). Such a graph is not kept: "" when none.
std::string unreplayable_nodes(cudaGraph_t graph) {
  size_t count = 0;
  if (cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) return "cudaGraphGetNodes failed";
  std::vector<cudaGraphNode_t> nodes(count);
  if (count && cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) return "cudaGraphGetNodes failed";
  int allocs = 0, frees = 0;
  for (cudaGraphNode_t n : nodes) {
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(n, &t) != cudaSuccess) return "cudaGraphNodeGetType failed";
    allocs += t == cudaGraphNodeTypeMemAlloc;
    frees += t == cudaGraphNodeTypeMemFree;
  }
  if (allocs + frees == 0) return "";
  return "the captured step holds " + std::to_string(allocs) + " memory allocation and " + std::to_string(frees) +
         " free node(s) (a library allocated on the stream while captured)";
}
}  // namespace

bool StepGraphs::run(const Key& key, cudaStream_t stream, const std::function<void()>& enqueue) {
  if (!requested_ || failed_) {
    enqueue();
    return false;
  }
  const uint64_t epoch = DeviceBytes::epoch.load();
  if (std::any_of(graphs_.begin(), graphs_.end(), [&](const Entry& e) { return e.epoch != epoch; })) {
    clear();  // an address a graph holds may have moved: capture again
  }
  for (Entry& e : graphs_) {
    if (!(e.key == key)) continue;
    e.used = ++clock_;
    cudaCheck(cudaGraphLaunch(e.exec, stream));
    ++replays_;
    return true;
  }
  if (std::find(seen_.begin(), seen_.end(), key) == seen_.end()) {
    if (seen_.size() >= 4 * kMaxGraphs) seen_.erase(seen_.begin());
    seen_.push_back(key);
    enqueue();
    return false;
  }

  cudaGraph_t graph = nullptr;
  std::string why;
  cudaCheck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    CaptureScope scope;
    enqueue();
  } catch (const CaptureFailed& e) {
    why = e.what();
  } catch (...) {
    // Not a library call's failure (a user error, say): leave capture mode, pass it on.
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (why.empty() && ended != cudaSuccess) why = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(ended);
  if (why.empty() && DeviceBytes::epoch.load() != epoch) why = "the step allocated device memory while captured";
  if (why.empty()) why = unreplayable_nodes(graph);
  cudaGraphExec_t exec = nullptr;
  if (why.empty()) {
    const cudaError_t rc = cudaGraphInstantiateWithFlags(&exec, graph, 0);
    if (rc != cudaSuccess) why = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(rc);
  }
  if (graph) cudaGraphDestroy(graph);
  if (!why.empty()) {
    if (exec) cudaGraphExecDestroy(exec);
    fail(why);
    enqueue();  // nothing captured has run: the step as is
    return false;
  }
  if (graphs_.size() >= kMaxGraphs) {
    auto lru = std::min_element(graphs_.begin(), graphs_.end(),
                                [](const Entry& a, const Entry& b) { return a.used < b.used; });
    cudaGraphExecDestroy(lru->exec);
    graphs_.erase(lru);
  }
  graphs_.push_back({key, exec, epoch, ++clock_});
  ++captures_;
  cudaCheck(cudaGraphLaunch(exec, stream));
  ++replays_;
  return true;
}

std::string StepGraphs::note() const {
  if (!requested_) return "";
  if (failed_) return "capture failed: " + failure_;
  if (replays_ == 0) return declined_.empty() ? "no step ran as a graph" : "not used: " + declined_;
  std::string s = std::to_string(replays_) + " steps from " + std::to_string(captures_) + " captured graphs";
  if (!declined_.empty()) s += "; not used where " + declined_;
  return s;
}

}  // namespace cnnscale::nn::cuda
