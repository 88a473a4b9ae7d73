// Small HDF5 writing helpers that checkpoints and the Keras export share. Failures are
// internal errors (the file was created writable; a full disk shows at flush, which
// callers check).
#pragma once
#include <hdf5.h>

#include <string>
#include <vector>

#include "core/base/h5_id.hpp"
#include "core/base/shape.hpp"

namespace distrain {

// A scalar attribute of a fixed-length, null-padded UTF-8 string (h5py reads it as str).
void write_attr_str(hid_t obj, const char* name, const std::string& v);
// The string type write_attr_str uses, sized for `v`.
H5Id string_type(const std::string& v);
// The group `name` under `parent`, created if missing (the caller closes it).
hid_t ensure_group(hid_t parent, const std::string& name);
// A little-endian float32 dataset group/name of `shape`, holding `values`; the caller may
// add attributes to it before closing.
H5Id write_f32_dataset(hid_t group, const std::string& name, const Shape& shape, const std::vector<float>& values);

}  // namespace distrain
