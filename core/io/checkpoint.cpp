#include "core/io/checkpoint.hpp"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>
#include <system_error>
#include <utility>

#include <fmt/ranges.h>

#include "core/base/crc32c.hpp"
#include "core/base/error.hpp"
#include "core/base/h5_id.hpp"
#include "core/base/host_memory.hpp"
#include "core/io/h5_write.hpp"

namespace distrain {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "distrain-checkpoint";
constexpr int64_t kFormatVersion = 1;
constexpr const char* kChecksumAttr = "crc32c";
// HDF5 keeps an attribute in its object's header, at most 64 KiB; a longer recipe text is
// stored as the dataset /recipe instead (readers look for the attribute first).
constexpr size_t kMaxAttributeText = 60000;

void h5check(bool ok, const std::string& path, const std::string& what) {
  if (!ok) throw UserError(fmt::format("{}: {}", path, what));
}

void write_attr_i64(hid_t obj, const char* name, int64_t v) {
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Id attr(H5Acreate2(obj, name, H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  DT_CHECK(attr.ok() && H5Awrite(attr, H5T_NATIVE_INT64, &v) >= 0, "writing attribute {}", name);
}

void write_attr_f64(hid_t obj, const char* name, double v) {
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Id attr(H5Acreate2(obj, name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  DT_CHECK(attr.ok() && H5Awrite(attr, H5T_NATIVE_DOUBLE, &v) >= 0, "writing attribute {}", name);
}

// A scalar string dataset, for text too long for an attribute.
void write_dataset_str(hid_t obj, const char* name, const std::string& v) {
  H5Id type = string_type(v);
  H5Id space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Id ds(H5Dcreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
  DT_CHECK(ds.ok() && H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()) >= 0, "writing dataset {}", name);
}

bool read_dataset_str(hid_t obj, const char* name, std::string& v) {
  if (H5Lexists(obj, name, H5P_DEFAULT) <= 0) return false;
  H5Id ds(H5Dopen2(obj, name, H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) return false;
  H5Id stored(H5Dget_type(ds), H5Tclose);
  if (H5Tget_class(stored) != H5T_STRING || H5Tis_variable_str(stored) > 0) return false;
  H5Id space(H5Dget_space(ds), H5Sclose);  // H5Dread fills every element: one string, no more
  if (!space.ok() || H5Sget_simple_extent_npoints(space) != 1) return false;
  std::string buf(H5Tget_size(stored), '\0');
  if (H5Dread(ds, stored, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) < 0) return false;
  buf.resize(std::min(buf.size(), buf.find('\0')));
  v = std::move(buf);
  return true;
}

// H5Aread writes every element of the attribute: one holding more than the one value
// expected (a corrupt or foreign file) would write past it.
bool single_value(hid_t attr) {
  H5Id space(H5Aget_space(attr), H5Sclose);
  return space.ok() && H5Sget_simple_extent_npoints(space) == 1;
}

// A stored string longer than this is a corrupt file, not a recipe.
constexpr size_t kMaxAttrString = size_t{1} << 26;

bool read_attr_i64(hid_t obj, const char* name, int64_t& v) {
  if (H5Aexists(obj, name) <= 0) return false;
  H5Id attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  return attr.ok() && single_value(attr) && H5Aread(attr, H5T_NATIVE_INT64, &v) >= 0;
}

bool read_attr_f64(hid_t obj, const char* name, double& v) {
  if (H5Aexists(obj, name) <= 0) return false;
  H5Id attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  return attr.ok() && single_value(attr) && H5Aread(attr, H5T_NATIVE_DOUBLE, &v) >= 0;
}

bool read_attr_str(hid_t obj, const char* name, std::string& v) {
  if (H5Aexists(obj, name) <= 0) return false;
  H5Id attr(H5Aopen(obj, name, H5P_DEFAULT), H5Aclose);
  if (!attr.ok() || !single_value(attr)) return false;
  H5Id stored(H5Aget_type(attr), H5Tclose);
  if (H5Tget_class(stored) != H5T_STRING || H5Tis_variable_str(stored) > 0) return false;
  const size_t size = H5Tget_size(stored);
  if (size == 0 || size > kMaxAttrString) return false;
  std::string buf(size, '\0');
  if (H5Aread(attr, stored, buf.data()) < 0) return false;  // as stored: HDF5 does not convert UTF-8 to ASCII
  buf.resize(std::min(buf.size(), buf.find('\0')));
  v = std::move(buf);
  return true;
}

uint32_t checksum(const std::vector<float>& host) {
  return crc32c(std::string_view(reinterpret_cast<const char*>(host.data()), host.size() * sizeof(float)));
}

// Writes a float32 dataset at group/name with the given shape, and the CRC32C of its
// bytes as attribute "crc32c", so that bit rot is found when it is read.
void write_array(hid_t group, const std::string& name, const Shape& shape, const std::vector<float>& host) {
  H5Id ds = write_f32_dataset(group, name, shape, host);
  write_attr_i64(ds, kChecksumAttr, checksum(host));
}


// Reads dataset `path` into host; it must exist with `shape`.
void read_array(hid_t file, const std::string& file_path, const std::string& path, const Shape& shape,
                std::vector<float>& host) {
  const std::string mismatch = "does not match this model (is it a checkpoint of another recipe?)";
  // H5Lexists fails on a missing intermediate group, so walk the path.
  std::string walked;
  for (size_t pos = 1; pos != std::string::npos;) {
    const size_t next = path.find('/', pos);
    walked = path.substr(0, next);
    if (H5Lexists(file, walked.c_str(), H5P_DEFAULT) <= 0)
      throw UserError(fmt::format("{}: has no {}; the checkpoint {}", file_path, path, mismatch));
    pos = next == std::string::npos ? next : next + 1;
  }
  H5Id ds(H5Dopen2(file, path.c_str(), H5P_DEFAULT), H5Dclose);
  h5check(ds.ok(), file_path, "cannot open " + path);
  H5Id space(H5Dget_space(ds), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(static_cast<size_t>(std::max(rank, 0)));
  H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  const Shape stored(std::vector<int64_t>(dims.begin(), dims.end()));
  if (stored != shape)
    throw UserError(fmt::format("{}: {} has shape {}, the model expects {}; the checkpoint {}", file_path, path,
                                stored.str(), shape.str(), mismatch));
  // HDF5 would convert an int32 or float64 dataset silently; the format stores float32.
  H5Id type(H5Dget_type(ds), H5Tclose);
  if (H5Tget_class(type) != H5T_FLOAT || H5Tget_size(type) != 4)
    throw UserError(fmt::format("{}: {} is not float32 (class {}, {} bytes); distrain checkpoints hold float32", file_path,
                                path, static_cast<int>(H5Tget_class(type)), H5Tget_size(type)));
  host.resize(static_cast<size_t>(shape.numel()));
  h5check(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, host.data()) >= 0, file_path,
          "cannot read " + path + " (file truncated or corrupt?)");
  int64_t stored_crc = 0;  // files written before checksums, or by other tools, have none
  const bool has_crc = H5Aexists(ds, kChecksumAttr) > 0;
  if (has_crc && !read_attr_i64(ds, kChecksumAttr, stored_crc))
    throw UserError(fmt::format("{}: {} has a crc32c attribute that is not one integer (the file is corrupt, or was "
                                "edited; delete the attribute to accept an edit)", file_path, path));
  if (has_crc && stored_crc != checksum(host))
    throw UserError(fmt::format("{}: {} does not match its checksum (the file is corrupt: bit rot, or an edit; "
                                "delete its crc32c attribute to accept an edit)",
                                file_path, path));
  // distrain never saves NaN or infinity; one read here was written by hand, and would make
  // every loss NaN (or evaluate to a null loss) instead of being named.
  const auto bad = std::find_if(host.begin(), host.end(), [](float x) { return !std::isfinite(x); });
  if (bad != host.end())
    throw UserError(fmt::format("{}: {} holds {} at element {}; a checkpoint must hold finite numbers (the file was edited "
                                "or is corrupt)", file_path, path, *bad, bad - host.begin()));
}


H5Id open_for_read(const std::string& path) {
  quiet_hdf5();
  DT_USER_CHECK(fs::is_regular_file(path), "{}: checkpoint not found", path);
  const htri_t is_h5 = H5Fis_hdf5(path.c_str());
  DT_USER_CHECK(is_h5 > 0, "{}: not an HDF5 file (not a distrain checkpoint, or truncated)", path);
  H5Id f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  DT_USER_CHECK(f.ok(), "{}: cannot open as HDF5 (truncated or corrupt?)", path);
  return f;
}

// Returns 0 or the errno: some file systems report a full disk only when flushing.
int fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return errno;
  const int err = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

int64_t free_bytes(const fs::path& dir) {
  struct statvfs info {};
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &info) != 0) return -1;
  return static_cast<int64_t>(info.f_bavail) * static_cast<int64_t>(info.f_frsize);
}

// About what a checkpoint takes on disk: every variable, every optimizer slot of the
// trainable ones, the recipe and HDF5's bookkeeping.
int64_t checkpoint_bytes(ModelState& model, OptimizerState& optimizer, const std::string& recipe_text) {
  int64_t bytes = static_cast<int64_t>(recipe_text.size()) + (64 << 10);
  const auto slots = static_cast<int64_t>(optimizer.slot_names().size());
  const auto element = static_cast<int64_t>(dtype_size(ParamArena::kDType));
  for (const Variable& v : model.layout().variables()) bytes += v.full_shape.numel() * element * (1 + (v.trainable ? slots : 0));
  return bytes;
}

// A save that failed for want of space or permission is the user's to fix, not a bug. HDF5
// reports only a failed call, so errno and the free space (measured while the partial
// file still held its share) tell a full disk apart. Otherwise rethrows what was thrown.
[[noreturn]] void explain_save_failure(const std::string& path, int err, int64_t needed, int64_t free_before) {
  const fs::path dir = fs::path(path).parent_path();
  if (err == ENOSPC && free_before >= needed)  // bytes to spare: the file system has no file (inode) left
    throw UserError(fmt::format("{}: not saved: the disk is full: no file can be created in {} (no free inodes; see df -i), "
                                "though {} are free; free some files or choose another run folder with --run-dir; "
                                "earlier checkpoints are kept",
                                path, dir.empty() ? "." : dir.string(), format_bytes(free_before)));
  if (err == ENOSPC || err == EDQUOT || (free_before >= 0 && free_before < needed))
    throw UserError(fmt::format("{}: not saved: the disk is full (a checkpoint needs about {}, {} free in {}); free space "
                                "or choose another run folder with --run-dir; earlier checkpoints are kept",
                                path, format_bytes(needed), format_bytes(std::max<int64_t>(free_bytes(dir), 0)),
                                dir.empty() ? "." : dir.string()));
  if (err == EACCES || err == EPERM || err == EROFS)
    throw UserError(fmt::format("{}: not saved: {}; make the run folder writable or choose another with --run-dir", path,
                                std::strerror(err)));
  throw;
}

// Never leaves the disk full: emptied first, the file gives its space back even where a
// failed HDF5 close still holds it open.
void discard_partial_save(const std::string& tmp) {
  ::truncate(tmp.c_str(), 0);
  std::error_code ignored;
  fs::remove(tmp, ignored);
}

// A checkpoint is what a run resumes from, and rotation deletes older ones for it: one
// holding NaN or infinity must never be written.
void check_finite(const std::vector<float>& host, const std::string& path, const std::string& what) {
  const bool finite = std::all_of(host.begin(), host.end(), [](float x) { return std::isfinite(x); });
  DT_USER_CHECK(finite, "{}: not saved: {} holds NaN or infinity (training diverged)", path, what);
}

// Writes the whole checkpoint `path` to `tmp`; throws, leaving `tmp` for the caller to
// remove, when a variable or slot is not finite.
void write_checkpoint_file(const std::string& path, const std::string& tmp, ModelState& model, OptimizerState& optimizer,
                           const TrainState& state, const std::string& recipe_text, const std::string& vocabulary,
                           const std::vector<std::string>& class_names) {
  const ParamArena& arena = model.layout();
  H5Id f(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!f.ok()) throw std::system_error(errno, std::generic_category(), tmp + ": cannot create");  // explained by the caller
  write_attr_str(f, "format", kFormat);
  write_attr_i64(f, "format_version", kFormatVersion);
  write_attr_i64(f, "step", state.step);
  write_attr_i64(f, "epoch", state.epoch);
  if (recipe_text.size() <= kMaxAttributeText) write_attr_str(f, "recipe", recipe_text);
  else write_dataset_str(f, "recipe", recipe_text);
  write_attr_str(f, "distrain_version", DISTRAIN_VERSION);
  if (!vocabulary.empty() && vocabulary.size() <= kMaxAttributeText) write_attr_str(f, "vocabulary", vocabulary);
  if (vocabulary.size() > kMaxAttributeText) write_dataset_str(f, "vocabulary", vocabulary);
  if (!class_names.empty()) write_dataset_str(f, "class_names", fmt::format("{}", fmt::join(class_names, "\n")));
  {
    H5Id g(ensure_group(f, "model"), H5Gclose);
    std::vector<float> host;
    for (size_t i = 0; i < arena.variables().size(); ++i) {
      const Variable& v = arena.variables()[i];
      H5Id lg(ensure_group(g, v.layer), H5Gclose);
      model.read(static_cast<int>(i), host);  // one variable at a time, gathered if sharded
      check_finite(host, path, v.layer + "/" + v.name);
      write_array(lg, v.name, v.full_shape, host);
    }
  }
  {
    H5Id g(ensure_group(f, "optimizer"), H5Gclose);
    write_attr_str(g, "type", optimizer.type());
    write_attr_i64(g, "iterations", optimizer.iterations());
    std::vector<float> host;
    for (const std::string& slot : optimizer.slot_names()) {
      H5Id sg(ensure_group(g, slot), H5Gclose);
      for (const Variable& v : arena.variables()) {
        if (!v.trainable) continue;
        H5Id lg(ensure_group(sg, v.layer), H5Gclose);
        optimizer.read(slot, v, host);  // one variable at a time, gathered if sharded
        check_finite(host, path, slot + "/" + v.layer + "/" + v.name);
        write_array(lg, v.name, v.full_shape, host);
      }
    }
  }
  {
    H5Id g(ensure_group(f, "state"), H5Gclose);
    write_attr_i64(g, "epoch", state.epoch);
    write_attr_i64(g, "batch_in_epoch", state.batch_in_epoch);
    write_attr_f64(g, "epoch_loss_sum", state.epoch_stats.loss_sum);
    write_attr_i64(g, "epoch_correct", state.epoch_stats.correct);
    write_attr_i64(g, "epoch_count", state.epoch_stats.count);
    write_attr_f64(g, "epoch_seconds", state.epoch_seconds);
    write_attr_f64(g, "epoch_grad_norm_sum", state.epoch_grad_norm_sum);
    write_attr_i64(g, "epoch_grad_norms", state.epoch_grad_norms);
    if (!std::isnan(state.monitor.best)) {
      write_attr_f64(g, "best_metric", state.monitor.best);
      write_attr_i64(g, "best_step", state.monitor.best_step);
    }
    write_attr_i64(g, "validations_since_best", state.monitor.waited);
    write_attr_i64(g, "stopped_early", state.monitor.stopped_early ? 1 : 0);
  }
  DT_CHECK(H5Fflush(f, H5F_SCOPE_GLOBAL) >= 0, "flushing {}", tmp);
}

}  // namespace

void save_checkpoint(const std::string& path, ModelState& model, OptimizerState& optimizer, const TrainState& state,
                     const std::string& recipe_text, bool writer, const std::string& vocabulary,
                     const std::vector<std::string>& class_names) {
  if (!writer) {  // take part in gathering sharded variables and slots, write nothing
    const ParamArena& arena = model.layout();
    std::vector<float> host;
    for (size_t i = 0; i < arena.variables().size(); ++i) {
      model.read(static_cast<int>(i), host);
      check_finite(host, path, arena.variables()[i].layer + "/" + arena.variables()[i].name);  // stop with the writer
    }
    for (const std::string& slot : optimizer.slot_names())
      for (const Variable& v : arena.variables())
        if (v.trainable) optimizer.read(slot, v, host);
    return;
  }
  quiet_hdf5();
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const fs::path dir = fs::path(path).parent_path();
  if (!dir.empty()) fs::create_directories(dir);
  try {
    errno = 0;
    write_checkpoint_file(path, tmp, model, optimizer, state, recipe_text, vocabulary, class_names);
    if (const int err = fsync_path(tmp, O_RDONLY)) throw std::system_error(err, std::generic_category(), "fsync " + tmp);
    fs::rename(tmp, path);
  } catch (const UserError&) {  // not finite: already explained
    discard_partial_save(tmp);
    throw;
  } catch (const std::system_error& e) {  // creating, syncing or renaming: the error says why
    const int64_t free_before = free_bytes(dir);
    discard_partial_save(tmp);
    explain_save_failure(path, e.code().value(), checkpoint_bytes(model, optimizer, recipe_text), free_before);
  } catch (...) {  // a failed HDF5 write leaves only errno
    const int err = errno;
    const int64_t free_before = free_bytes(dir);
    discard_partial_save(tmp);
    explain_save_failure(path, err, checkpoint_bytes(model, optimizer, recipe_text), free_before);
  }
  fsync_path(dir.empty() ? "." : dir.string(), O_RDONLY | O_DIRECTORY);
}

namespace {
// A corrupt or edited /state must not steer a resumed run (a negative batch_in_epoch
// indexes before the epoch's order). What depends on the recipe, batch_in_epoch against
// the batches per epoch, the trainer checks.
void check_state(const TrainState& s, const std::string& path) {
  const LossStats& e = s.epoch_stats;
  DT_USER_CHECK(s.step >= 0 && s.epoch >= 0 && s.batch_in_epoch >= 0 && s.batch_in_epoch <= s.step,
                "{}: checkpoint state out of range (step {}, epoch {}, batch_in_epoch {}); the file is corrupt", path,
                s.step, s.epoch, s.batch_in_epoch);
  DT_USER_CHECK(e.count >= 0 && e.correct >= 0 && e.correct <= e.count && std::isfinite(e.loss_sum) &&
                    std::isfinite(s.epoch_seconds) && s.epoch_seconds >= 0,
                "{}: checkpoint epoch statistics out of range (count {}, correct {}, loss_sum {}, seconds {}); the file is "
                "corrupt",
                path, e.count, e.correct, e.loss_sum, s.epoch_seconds);
  DT_USER_CHECK(s.epoch_grad_norms >= 0 && s.epoch_grad_norms <= s.step && std::isfinite(s.epoch_grad_norm_sum) &&
                    s.epoch_grad_norm_sum >= 0,
                "{}: checkpoint gradient norms out of range ({} norms, sum {}); the file is corrupt", path, s.epoch_grad_norms,
                s.epoch_grad_norm_sum);
  const ValidationMonitor& m = s.monitor;
  DT_USER_CHECK(!std::isinf(m.best) && m.best_step >= 0 && m.best_step <= s.step && m.waited >= 0 && m.waited <= s.step,
                "{}: checkpoint validation record out of range (best {} at step {}, {} validations since); the file is corrupt",
                path, m.best, m.best_step, m.waited);
}
}  // namespace

CheckpointHeader read_checkpoint_header(const std::string& path) {
  H5Id f = open_for_read(path);
  CheckpointHeader h;
  h.path = path;
  std::string format;
  DT_USER_CHECK(read_attr_str(f, "format", format) && format == kFormat, "{}: HDF5 but not a distrain checkpoint (no format = \"{}\")",
                path, kFormat);
  int64_t version = 0;
  DT_USER_CHECK(read_attr_i64(f, "format_version", version) && version == kFormatVersion,
                "{}: checkpoint format_version {} is not supported (this distrain reads {})", path, version, kFormatVersion);
  DT_USER_CHECK(read_attr_str(f, "recipe", h.recipe) || read_dataset_str(f, "recipe", h.recipe),
                "{}: checkpoint lacks its recipe attribute (corrupt?)", path);
  if (!read_attr_str(f, "vocabulary", h.vocabulary)) read_dataset_str(f, "vocabulary", h.vocabulary);
  if (std::string names; read_dataset_str(f, "class_names", names))
    for (size_t at = 0; at <= names.size();) {
      const size_t end = std::min(names.find('\n', at), names.size());
      h.class_names.push_back(names.substr(at, end - at));
      at = end + 1;
    }
  read_attr_str(f, "distrain_version", h.distrain_version);
  bool ok = read_attr_i64(f, "step", h.state.step);
  H5Id g(H5Gopen2(f, "state", H5P_DEFAULT), H5Gclose);
  DT_USER_CHECK(ok && g.ok(), "{}: checkpoint lacks /state (truncated or corrupt?)", path);
  ok = read_attr_i64(g, "epoch", h.state.epoch) && read_attr_i64(g, "batch_in_epoch", h.state.batch_in_epoch) &&
       read_attr_f64(g, "epoch_loss_sum", h.state.epoch_stats.loss_sum) &&
       read_attr_i64(g, "epoch_correct", h.state.epoch_stats.correct) &&
       read_attr_i64(g, "epoch_count", h.state.epoch_stats.count) && read_attr_f64(g, "epoch_seconds", h.state.epoch_seconds);
  DT_USER_CHECK(ok, "{}: checkpoint /state is incomplete (corrupt?)", path);
  // Absent from checkpoints written before optimizer.clip_norm: no norms then.
  if (!read_attr_f64(g, "epoch_grad_norm_sum", h.state.epoch_grad_norm_sum) ||
      !read_attr_i64(g, "epoch_grad_norms", h.state.epoch_grad_norms))
    h.state.epoch_grad_norm_sum = 0, h.state.epoch_grad_norms = 0;
  // Absent from checkpoints written before keep_best and early_stopping: nothing seen yet.
  ValidationMonitor& m = h.state.monitor;
  if (!read_attr_f64(g, "best_metric", m.best) || !read_attr_i64(g, "best_step", m.best_step)) m.best = NAN, m.best_step = 0;
  int64_t stopped = 0;
  read_attr_i64(g, "validations_since_best", m.waited);
  read_attr_i64(g, "stopped_early", stopped);
  m.stopped_early = stopped == 1;
  check_state(h.state, path);
  return h;
}

void load_weights(const std::string& path, ModelState& model) {
  H5Id f = open_for_read(path);
  const ParamArena& arena = model.layout();
  std::vector<float> host;
  for (size_t i = 0; i < arena.variables().size(); ++i) {
    const Variable& v = arena.variables()[i];
    read_array(f, path, "/model/" + v.layer + "/" + v.name, v.full_shape, host);
    model.write(static_cast<int>(i), host);
  }
}

void load_weights(const std::string& path, Model& model) {
  ArenaModelState state(model.params());
  load_weights(path, state);
}

void load_optimizer(const std::string& path, const ParamArena& layout, OptimizerState& optimizer) {
  H5Id f = open_for_read(path);
  H5Id g(H5Gopen2(f, "optimizer", H5P_DEFAULT), H5Gclose);
  DT_USER_CHECK(g.ok(), "{}: checkpoint lacks /optimizer", path);
  int64_t iterations = 0;
  DT_USER_CHECK(read_attr_i64(g, "iterations", iterations), "{}: /optimizer lacks iterations", path);
  DT_USER_CHECK(iterations >= 0, "{}: /optimizer iterations is {}; the file is corrupt", path, iterations);
  std::string type;
  DT_USER_CHECK(read_attr_str(g, "type", type) && type == optimizer.type(),
                "{}: optimizer state is for '{}', the recipe uses '{}' (use checkpoint.init_from to load weights only)", path,
                type, optimizer.type());
  std::vector<float> host;
  for (const std::string& slot : optimizer.slot_names())
    for (const Variable& v : layout.variables())
      if (v.trainable) {
        read_array(f, path, "/optimizer/" + slot + "/" + v.layer + "/" + v.name, v.full_shape, host);
        optimizer.write(slot, v, host);
      }
  optimizer.set_iterations(iterations);
}

std::string checkpoint_name(int64_t step) { return fmt::format("ckpt-{:06d}.h5", step); }

std::string find_checkpoint(const std::string& file_or_run_dir) {
  const fs::path path(file_or_run_dir);
  std::error_code ec;
  const bool folder = fs::is_directory(path, ec);
  const fs::path dir = folder ? path : path.has_parent_path() ? path.parent_path() : fs::path(".");
  const std::vector<std::string> found = list_checkpoints(dir.string());
  if (folder) {
    DT_USER_CHECK(!found.empty(), "{}: a folder without checkpoints (ckpt-<step>.h5)", file_or_run_dir);
    return found.back();
  }
  if (fs::exists(path, ec) || found.empty()) return file_or_run_dir;  // read_checkpoint_header says what is wrong
  std::vector<std::string> names;
  for (const std::string& f : found) names.push_back(fs::path(f).filename().string());
  throw UserError(fmt::format("{}: checkpoint not found; the folder has {}", file_or_run_dir, fmt::join(names, ", ")));
}

bool is_partial_save(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  return name.ends_with(".tmp") || name.find(".tmp.") != std::string::npos;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  if (!fs::is_directory(dir)) return {};
  static const std::regex pattern(R"(ckpt-(\d+)\.h5)");
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !std::regex_match(name, m, pattern)) continue;
    // distrain writes steps that fit int64; a longer number is some other file: ignored.
    int64_t step = 0;
    const std::string digits = m[1];
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
    if (ec == std::errc() && end == digits.data() + digits.size()) found.emplace_back(step, e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [step, p] : found) out.push_back(std::move(p));
  return out;
}

void prune_checkpoints(const std::string& dir, int64_t keep) {
  const auto all = list_checkpoints(dir);
  // The newest is what a run resumes from: whatever `keep` says, it stays.
  const auto kept = static_cast<size_t>(std::max<int64_t>(keep, 1));
  for (size_t i = 0; i + kept < all.size(); ++i) fs::remove(all[i]);
}

}  // namespace distrain
