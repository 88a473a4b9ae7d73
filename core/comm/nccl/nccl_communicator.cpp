#include "core/comm/nccl/nccl_communicator.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <set>

#include "core/base/error.hpp"

namespace distrain {

namespace {

#define DT_NCCL(call)                                                                                 \
  do {                                                                                                \
    const ncclResult_t r_ = (call);                                                                   \
    if (r_ != ncclSuccess) throw Error(fmt::format("nccl: {} failed: {}", #call, ncclGetErrorString(r_))); \
  } while (0)

#define DT_CUDA(call)                                                                                 \
  do {                                                                                                \
    const cudaError_t e_ = (call);                                                                    \
    if (e_ != cudaSuccess) throw Error(fmt::format("nccl: {} failed: {}", #call, cudaGetErrorString(e_))); \
  } while (0)

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::sum ? ncclSum : ncclMax; }

void check_gpu_f32(const Tensor& t, const char* what) {
  DT_CHECK(t.device.is_cuda(), "nccl communicator: {} is on {}; it moves cuda memory only", what, t.device.str());
  DT_CHECK(t.dtype == DType::f32, "nccl communicator: {} is {}, only float32 is reduced", what, dtype_name(t.dtype));
}

}  // namespace

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  // Collectives run on the communicator's own stream; the caller's work is ordered
  // before them by synchronising the device, and after them by waiting on the stream.
  void begin() const {
    DT_CUDA(cudaSetDevice(device));
    DT_CUDA(cudaDeviceSynchronize());
  }
  void end() const { DT_CUDA(cudaStreamSynchronize(stream)); }
};

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl, int rank, int size)
    : impl_(std::move(impl)), rank_(rank), size_(size) {}

NcclCommunicator::~NcclCommunicator() {
  if (!impl_) return;
  cudaSetDevice(impl_->device);
  if (impl_->comm) ncclCommDestroy(impl_->comm);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

std::vector<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create_local(const std::vector<int>& devices) {
  DT_USER_CHECK(std::set<int>(devices.begin(), devices.end()).size() == devices.size(),
                "nccl: every replica needs its own GPU (NCCL refuses two ranks on one GPU); for several replicas on one GPU "
                "use cross_device_ops = \"hierarchical_copy\" or \"reduce_to_one_device\"");
  std::vector<ncclComm_t> comms(devices.size());
  DT_NCCL(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()));
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto impl = std::make_unique<Impl>();
    impl->comm = comms[i];
    impl->device = devices[i];
    DT_CUDA(cudaSetDevice(devices[i]));
    DT_CUDA(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
    out.push_back(std::unique_ptr<NcclCommunicator>(
        new NcclCommunicator(std::move(impl), static_cast<int>(i), static_cast<int>(devices.size()))));
  }
  return out;
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create_world(MpiCommunicator& mpi, int device) {
  ncclUniqueId id{};
  if (mpi.rank() == 0) DT_NCCL(ncclGetUniqueId(&id));
  mpi.broadcast_bytes(&id, sizeof id, 0);
  auto impl = std::make_unique<Impl>();
  impl->device = device;
  DT_CUDA(cudaSetDevice(device));
  DT_CUDA(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  DT_NCCL(ncclCommInitRank(&impl->comm, mpi.size(), id, mpi.rank()));
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(impl), mpi.rank(), mpi.size()));
}

void NcclCommunicator::all_reduce(Tensor inout, ReduceOp op) {
  check_gpu_f32(inout, "all_reduce tensor");
  impl_->begin();
  DT_NCCL(ncclAllReduce(inout.data, inout.data, static_cast<size_t>(inout.numel()), ncclFloat, nccl_op(op), impl_->comm,
                        impl_->stream));
  impl_->end();
}

void NcclCommunicator::reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) {
  check_gpu_f32(in, "reduce_scatter input");
  check_gpu_f32(out, "reduce_scatter output");
  DT_CHECK(in.numel() == out.numel() * size_, "reduce_scatter: input {} is not {} x output {}", in.numel(), size_, out.numel());
  impl_->begin();
  DT_NCCL(ncclReduceScatter(in.data, out.data, static_cast<size_t>(out.numel()), ncclFloat, nccl_op(op), impl_->comm,
                            impl_->stream));
  impl_->end();
}

void NcclCommunicator::all_gather(const Tensor& in, Tensor out) {
  check_gpu_f32(in, "all_gather input");
  check_gpu_f32(out, "all_gather output");
  DT_CHECK(out.numel() == in.numel() * size_, "all_gather: output {} is not {} x input {}", out.numel(), size_, in.numel());
  impl_->begin();
  DT_NCCL(ncclAllGather(in.data, out.data, static_cast<size_t>(in.numel()), ncclFloat, impl_->comm, impl_->stream));
  impl_->end();
}

void NcclCommunicator::broadcast(Tensor t, int root) {
  check_gpu_f32(t, "broadcast tensor");
  impl_->begin();
  DT_NCCL(ncclBroadcast(t.data, t.data, static_cast<size_t>(t.numel()), ncclFloat, root, impl_->comm, impl_->stream));
  impl_->end();
}

void NcclCommunicator::barrier() {
  // NCCL has no barrier: an all-reduce of one float orders every rank.
  float* one = nullptr;
  impl_->begin();
  DT_CUDA(cudaMalloc(&one, sizeof(float)));
  const ncclResult_t r = ncclAllReduce(one, one, 1, ncclFloat, ncclSum, impl_->comm, impl_->stream);
  impl_->end();
  cudaFree(one);
  DT_NCCL(r);
}

}  // namespace distrain
