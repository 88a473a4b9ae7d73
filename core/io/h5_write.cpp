#include "core/io/h5_write.hpp"

#include <algorithm>

#include "core/base/error.hpp"

namespace distrain {

H5Id string_type(const std::string& v) {
  H5Id type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(type, std::max<size_t>(v.size(), 1));
  H5Tset_strpad(type, H5T_STR_NULLPAD);  // the full text, no terminator: h5py reads it as bytes/str
  H5Tset_cset(type, H5T_CSET_UTF8);
  return type;
}

void write_attr_str(hid_t obj, const char* name, const std::string& v) {
  H5Id type = string_type(v);
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Id attr(H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  std::string padded = v.empty() ? std::string(1, '\0') : v;
  DT_CHECK(attr.ok() && H5Awrite(attr, type, padded.data()) >= 0, "writing attribute {}", name);
}

hid_t ensure_group(hid_t parent, const std::string& name) {
  if (H5Lexists(parent, name.c_str(), H5P_DEFAULT) > 0) return H5Gopen2(parent, name.c_str(), H5P_DEFAULT);
  return H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
}

H5Id write_f32_dataset(hid_t group, const std::string& name, const Shape& shape, const std::vector<float>& values) {
  std::vector<hsize_t> dims(shape.dims().begin(), shape.dims().end());
  H5Id space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  H5Id ds(H5Dcreate2(group, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  DT_CHECK(ds.ok() && H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) >= 0,
           "writing dataset {}", name);
  return ds;
}

}  // namespace distrain
