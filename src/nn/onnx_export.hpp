// onnx_export.hpp — `cnnscale export … --onnx OUT.onnx`: a model's inference graph as an
// ONNX file (opset 17, IR 8) that ONNX Runtime and other runtimes run. Nothing else of nn
// knows ONNX but this and onnx_import.
//
// Contract:
//  - inference semantics: batch norms with their running statistics (BatchNormalization
//    in inference mode), dropout and stochastic depth left out (the identity in eval);
//    the logits equal the model's forward_eval's to float32 rounding;
//  - input "input" N×C×H×W, output "logits" N×classes, N dynamic (the batch dimension is a
//    symbol); H and W fixed at the model's input size (adaptive pools and channel
//    shuffles are written for that size);
//  - every parameter an initializer under its state_dict name (num_batches_tracked left
//    out: inference does not read it); a convolution written from nn.Linear's out × in
//    weight (ConvNeXt's pointwise linears) and a layer norm's weight and bias are stored in
//    the shape their ONNX node reads (out × in × 1 × 1; C × 1 × 1);
//  - layers without an ONNX operator of their own are written as the operators torch's
//    exporter uses: SiLU = x·Sigmoid(x), GELU = x·½·(1 + Erf(x/√2)), ReLU6 = Clip(0, 6),
//    LayerNorm over channels = ReduceMean/Sub/Mul/ReduceMean/Add/Sqrt/Div/Mul/Add over axis
//    1, channel shuffle = Reshape/Transpose/Reshape, channel slice = Slice, an adaptive
//    average pool = AveragePool where the bins are equal, else a MatMul by the bins'
//    averaging matrix;
//  - the file is checked by onnx::checker before it is returned.
#pragma once
#include <string>

#include "nn/graph.hpp"

namespace cnnscale::nn {

// The serialized ModelProto of `mg` with parameters `params` (flat, mg.graph's layout).
std::string onnx_export(const ModelGraph& mg, const float* params, const std::string& producer_version);

}  // namespace cnnscale::nn
