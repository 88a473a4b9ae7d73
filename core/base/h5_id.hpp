// H5Id: RAII for HDF5 ids (files, groups, datasets, spaces, types), shared by the
// checkpoint files and the HDF5 data reader. HDF5's own error printing is switched off
// by quiet_hdf5(): callers turn failed calls into one-line messages instead.
#pragma once
#include <hdf5.h>

#include <utility>

namespace distrain {

class H5Id {
 public:
  H5Id(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~H5Id() {
    if (id_ >= 0) close_(id_);
  }
  H5Id(H5Id&& o) noexcept : id_(std::exchange(o.id_, -1)), close_(o.close_) {}
  H5Id(const H5Id&) = delete;
  H5Id& operator=(const H5Id&) = delete;
  operator hid_t() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// Also keeps HDF5 from closing files at exit. A write that fails on a full disk makes
// H5Fclose fail half-way: HDF5 1.10 frees the file but keeps its id, and its exit handler
// then closed the freed file again (SIGSEGV after the error was reported). Every file is
// closed by its H5Id, so nothing is left for that handler. main calls this before any other
// HDF5 call (H5dont_atexit has no effect after one).
inline void quiet_hdf5() {
  static const bool once = [] {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)once;
}

}  // namespace distrain
