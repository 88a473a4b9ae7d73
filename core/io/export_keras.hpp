// A trained model for Keras 3 (distrain export --format keras):
//   FILE.weights.h5  what Keras's model.save_weights writes: /layers/<layer>/vars/<i>, the
//                    layers named as Keras names them in a Sequential model (conv2d,
//                    conv2d_1, dense, ...), variables in Keras's order; model.load_weights
//                    reads it into the same architecture built in Keras.
//   FILE.keras       Keras's whole-model archive (a zip of config.json, metadata.json and
//                    model.weights.h5): keras.models.load_model needs nothing else.
// Layers map to rescaling -> Rescaling, conv2d -> Conv2D, dense -> Dense, max_pool2d ->
// MaxPooling2D, avg_pool2d -> AveragePooling2D, batch_norm -> BatchNormalization,
// flatten -> Flatten, dropout -> Dropout, relu -> ReLU, global_avg_pool2d ->
// GlobalAveragePooling2D, layer_norm -> LayerNormalization, embedding -> Embedding, add ->
// Add. A chain of layers becomes a Sequential model, a graph (residual connections) a
// Functional one; a model holding another layer is refused naming it.
#pragma once
#include <string>

#include "core/io/exported_model.hpp"

namespace distrain {

// The model's Keras config (config.json of a .keras file): Sequential or Functional.
Json keras_config(const ExportedModel& model);
// Writes `path` (.weights.h5 or .keras, by its name) atomically; UserError for a model
// Keras cannot hold or a file that cannot be written.
void write_keras(const ExportedModel& model, const std::string& path);

}  // namespace distrain
