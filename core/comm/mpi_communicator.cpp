#include "core/comm/mpi_communicator.hpp"

#include <mpi.h>

#include <cstdlib>

#include "core/base/error.hpp"

namespace distrain {

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw Error(fmt::format("mpi: {} failed: {}", what, std::string(text, static_cast<size_t>(len))));
}

void check_f32(const Tensor& t, const char* what) {
  DT_CHECK(t.device.is_cpu(), "mpi communicator: {} is on {}; it moves host (cpu) memory only", what, t.device.str());
  DT_CHECK(t.dtype == DType::f32, "mpi communicator: {} is {}, only float32 is reduced", what, dtype_name(t.dtype));
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::sum ? MPI_SUM : MPI_MAX; }

}  // namespace

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"})
    if (std::getenv(v)) return true;
  return false;
}

int launcher_rank() {
  return env_int("OMPI_COMM_WORLD_RANK", env_int("PMI_RANK", env_int("PMIX_RANK", env_int("SLURM_PROCID", 0))));
}

int launcher_size() {
  return env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", env_int("SLURM_STEP_NUM_TASKS", 1)));
}

void ensure_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void mpi_abort(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void mpi_finalize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string v(text, static_cast<size_t>(len));
  return v.substr(0, v.find_first_of(",\n"));
}

struct MpiCommunicator::Handle {
  MPI_Comm comm = MPI_COMM_WORLD;
};

MpiCommunicator::MpiCommunicator(std::unique_ptr<Handle> handle) : handle_(std::move(handle)) {
  MPI_Comm_rank(handle_->comm, &rank_);
  MPI_Comm_size(handle_->comm, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && handle_->comm != MPI_COMM_WORLD) MPI_Comm_free(&handle_->comm);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color) {
  auto h = std::make_unique<Handle>();
  check(MPI_Comm_split(handle_->comm, color, rank_, &h->comm), "MPI_Comm_split");
  MPI_Comm_set_errhandler(h->comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::move(h)));
}

MpiCommunicator::MpiCommunicator() : handle_(std::make_unique<Handle>()) {
  ensure_mpi();
  MPI_Comm_rank(handle_->comm, &rank_);
  MPI_Comm_size(handle_->comm, &size_);
}

void MpiCommunicator::all_reduce(Tensor inout, ReduceOp op) {
  DT_CHECK(inout.device.is_cpu(), "mpi communicator: all_reduce tensor is on {}", inout.device.str());
  DT_CHECK(inout.dtype == DType::f32 || inout.dtype == DType::f64, "mpi all_reduce of {}", dtype_name(inout.dtype));
  check(MPI_Allreduce(MPI_IN_PLACE, inout.data, static_cast<int>(inout.numel()),
                      inout.dtype == DType::f64 ? MPI_DOUBLE : MPI_FLOAT, mpi_op(op), handle_->comm),
        "MPI_Allreduce");
}

void MpiCommunicator::reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) {
  check_f32(in, "reduce_scatter input");
  check_f32(out, "reduce_scatter output");
  DT_CHECK(in.numel() == out.numel() * size_, "reduce_scatter: input {} is not {} x output {}", in.numel(), size_,
           out.numel());
  check(MPI_Reduce_scatter_block(in.data, out.data, static_cast<int>(out.numel()), MPI_FLOAT, mpi_op(op), handle_->comm),
        "MPI_Reduce_scatter_block");
}

void MpiCommunicator::all_gather(const Tensor& in, Tensor out) {
  check_f32(in, "all_gather input");
  check_f32(out, "all_gather output");
  DT_CHECK(out.numel() == in.numel() * size_, "all_gather: output {} is not {} x input {}", out.numel(), size_, in.numel());
  check(MPI_Allgather(in.data, static_cast<int>(in.numel()), MPI_FLOAT, out.data, static_cast<int>(in.numel()), MPI_FLOAT,
                      handle_->comm),
        "MPI_Allgather");
}

void MpiCommunicator::broadcast(Tensor t, int root) {
  DT_CHECK(t.device.is_cpu(), "mpi communicator: broadcast tensor is on {}", t.device.str());
  broadcast_bytes(t.data, t.bytes(), root);
}

void MpiCommunicator::barrier() { check(MPI_Barrier(handle_->comm), "MPI_Barrier"); }

void MpiCommunicator::broadcast_bytes(void* data, size_t bytes, int root) {
  check(MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, root, handle_->comm), "MPI_Bcast");
}

void MpiCommunicator::all_reduce_f64(double* values, int count) {
  check(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM, handle_->comm), "MPI_Allreduce");
}

}  // namespace distrain
