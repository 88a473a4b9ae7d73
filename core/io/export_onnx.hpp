// A trained model as ONNX (distrain export --format onnx), written with the ONNX library's
// own protobuf classes and checked with its checker: opset 17, input "input" (batch,
// input_shape...) float32 (or int32 token ids), output "logits" (batch, output shape...),
// NHWC like distrain and Keras. Image layers run in ONNX's NCHW between a transpose after
// the input and one before the first layer that needs NHWC (flatten, dense, layer norm),
// so that flatten keeps Keras's (H, W, C) order. Covers every distrain layer: rescaling,
// conv2d, dense (tied to an embedding too), max/avg_pool2d, batch_norm and dropout
// (inference), flatten, relu, gelu (GPT-2's tanh form), global_avg_pool2d, add,
// layer_norm, embedding, position_embedding and causal attention. A token model's input
// is (batch, sequence) of any length up to its position table's rows (one causal mask of
// that size, cut to the input's length).
#pragma once
#include <string>

#include "core/io/exported_model.hpp"

namespace distrain {

// Writes `path` atomically; UserError for a file that cannot be written. With
// `external_data`, or for a model past protobuf's 2 GiB, the weights go to `path`.data
// beside it (ONNX's external data, which onnxruntime and onnx.load read from there): then
// it returns true.
bool write_onnx(const ExportedModel& model, const std::string& path, bool external_data = false);

}  // namespace distrain
