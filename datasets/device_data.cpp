#include "datasets/device_data.hpp"

#include "core/backend/backend.hpp"

namespace distrain {

DeviceData::DeviceData(Backend& backend, const Dataset& data)
    : examples_(backend, data.example_shape.batched(data.size()), data.floats.empty() ? DType::u8 : DType::f32),
      labels_(backend, Shape{data.size()}, DType::i32) {
  backend.upload(data.floats.empty() ? static_cast<const void*>(data.pixels.data()) : data.floats.data(),
                  examples_.view());
  backend.upload(data.labels.data(), labels_.view());
}

int64_t DeviceData::bytes(const Dataset& data) {
  const int64_t per = data.floats.empty() ? 1 : 4;
  return data.size() * (data.example_shape.numel() * per + 4);
}

}  // namespace distrain
