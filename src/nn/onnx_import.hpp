// onnx_import.hpp — `--model FILE.onnx`: a CNN's forward graph exported from PyTorch
// (scripts/export-onnx.py: training mode, no constant folding, opset 14; 1–17 are read) read with
// Debian's libonnx (protobuf, onnx::checker) into a Graph through GraphBuilder; nothing
// else of nn knows ONNX.
//
// Contract:
//  - parameters are the file's initializers under their own names (the module's state_dict
//    names) and start from their values (Init::given), so a pretrained model fine-tunes and
//    a cnnscale checkpoint loads back into the module with load_state_dict(strict=True);
//    batch norms also get num_batches_tracked (0), which the export drops;
//  - nodes map one to one onto the graph's layers (Conv, BatchNormalization in training
//    mode, Relu, Clip(0, 6) = ReLU6, Sigmoid, HardSigmoid(1/6, 1/2), HardSwish, MaxPool,
//    AveragePool, GlobalAveragePool, ReduceMean over H×W, Flatten, Gemm (transB = 1),
//    Dropout, Add, Concat on channels, Mul by an N×C×1×1 tensor, Identity, zero Pad) and
//    two decomposed forms torch emits are recognised: x·Sigmoid(x) = SiLU and
//    x·0.5·(1 + Erf(x/√2)) = GELU (the two Muls in either order); a zero Pad that only an
//    AveragePool or a Conv without padding reads becomes that layer's padding;
//  - whatever else is a UserError naming the node, its op type and the supported ops; so is
//    a file that is not ONNX or is damaged, an eval-mode export (folded batch norms, onnx::
//    parameter names), an opset above 17, an attribute it does not read, an input whose channels or fixed height and
//    width differ from the data set's (both shapes named), or an output that is not
//    `classes` logits.
// A file that scripts/export-onnx.py wrote with its stochastic depth off says so in its
// metadata (cnnscale.stochastic_depth_removed), and the import notes it on rank 0.
// The model's name is the file's base name; its spec (what a checkpoint and run.json keep,
// and what a resume and `cnnscale export` rebuild from) is the file's absolute path; its
// identity (ModelGraph::identity, in the run's config) is "onnx sha256:HEX" of the bytes read,
// so a run resumes from a moved copy of the file and refuses an edited one.
#pragma once
#include <string>

#include "nn/graph.hpp"
#include "util/sample_shape.hpp"

namespace cnnscale::nn {

// True when name_or_spec names an ONNX file (ends in ".onnx").
bool is_onnx_model(const std::string& name_or_spec);

// Reads FILE.onnx for inputs of shape `input` and `classes` outputs.
ModelGraph onnx_model_graph(const std::string& path, const SampleShape& input, int classes);

}  // namespace cnnscale::nn
