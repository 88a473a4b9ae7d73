#include "core/comm/nccl/nccl_communicator.hpp"

#include <cuda_runtime.h>
#include <nccl.h>

#include <set>

#include "core/backend/cuda/cuda_check.hpp"
#include "core/base/error.hpp"

namespace distrain {

namespace {

#define DT_NCCL(call)                                                                                 \
  do {                                                                                                \
    const ncclResult_t r_ = (call);                                                                   \
    if (r_ != ncclSuccess) throw Error(fmt::format("nccl: {} failed: {}", #call, ncclGetErrorString(r_))); \
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
  cudaStream_t compute = nullptr;  // the caller's stream, or null
  cudaEvent_t queued = nullptr, done = nullptr;
  int device = 0;

  void init(int gpu, cudaStream_t compute_stream) {
    device = gpu;
    compute = compute_stream;
    DT_CUDA(cudaSetDevice(device));
    DT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    DT_CUDA(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming));
    DT_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  }
  // The collective waits for what the compute stream holds so far ...
  void begin() const {
    DT_CUDA(cudaSetDevice(device));
    if (!compute) {
      DT_CUDA(cudaDeviceSynchronize());
      return;
    }
    DT_CUDA(cudaEventRecord(queued, compute));
    DT_CUDA(cudaStreamWaitEvent(stream, queued, 0));
  }
  // ... and what the compute stream gets next waits for the collective.
  void end() const {
    if (!compute) {
      DT_CUDA(cudaStreamSynchronize(stream));
      return;
    }
    DT_CUDA(cudaEventRecord(done, stream));
    DT_CUDA(cudaStreamWaitEvent(compute, done, 0));
  }
};

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl, int rank, int size)
    : impl_(std::move(impl)), rank_(rank), size_(size) {}

NcclCommunicator::~NcclCommunicator() {
  if (!impl_) return;
  cudaSetDevice(impl_->device);
  if (impl_->stream) cudaStreamSynchronize(impl_->stream);
  if (impl_->comm) ncclCommDestroy(impl_->comm);
  if (impl_->queued) cudaEventDestroy(impl_->queued);
  if (impl_->done) cudaEventDestroy(impl_->done);
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

std::vector<std::unique_ptr<NcclCommunicator>> NcclCommunicator::create_local(const std::vector<int>& devices,
                                                                              const std::vector<cudaStream_t>& compute) {
  DT_CHECK(compute.empty() || compute.size() == devices.size(), "{} compute streams for {} devices", compute.size(),
           devices.size());
  DT_USER_CHECK(std::set<int>(devices.begin(), devices.end()).size() == devices.size(),
                "nccl: every replica needs its own GPU (NCCL refuses two ranks on one GPU); for several replicas on one GPU "
                "use cross_device_ops = \"hierarchical_copy\" or \"reduce_to_one_device\"");
  std::vector<ncclComm_t> comms(devices.size());
  DT_NCCL(ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()));
  std::vector<std::unique_ptr<NcclCommunicator>> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto impl = std::make_unique<Impl>();
    impl->comm = comms[i];
    impl->init(devices[i], compute.empty() ? nullptr : compute[i]);
    out.push_back(std::unique_ptr<NcclCommunicator>(
        new NcclCommunicator(std::move(impl), static_cast<int>(i), static_cast<int>(devices.size()))));
  }
  return out;
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::create_world(MpiCommunicator& mpi, int device, cudaStream_t compute) {
  ncclUniqueId id{};
  if (mpi.rank() == 0) DT_NCCL(ncclGetUniqueId(&id));
  mpi.broadcast_bytes(&id, sizeof id, 0);
  auto impl = std::make_unique<Impl>();
  impl->init(device, compute);
  DT_NCCL(ncclCommInitRank(&impl->comm, mpi.size(), id, mpi.rank()));
  return std::unique_ptr<NcclCommunicator>(new NcclCommunicator(std::move(impl), mpi.rank(), mpi.size()));
}

void NcclCommunicator::do_all_reduce(Tensor inout, ReduceOp op) {
  check_gpu_f32(inout, "all_reduce tensor");
  impl_->begin();
  DT_NCCL(ncclAllReduce(inout.data, inout.data, static_cast<size_t>(inout.numel()), ncclFloat, nccl_op(op), impl_->comm,
                        impl_->stream));
  impl_->end();
}

void NcclCommunicator::do_reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) {
  check_gpu_f32(in, "reduce_scatter input");
  check_gpu_f32(out, "reduce_scatter output");
  DT_CHECK(in.numel() == out.numel() * size_, "reduce_scatter: input {} is not {} x output {}", in.numel(), size_, out.numel());
  impl_->begin();
  DT_NCCL(ncclReduceScatter(in.data, out.data, static_cast<size_t>(out.numel()), ncclFloat, nccl_op(op), impl_->comm,
                            impl_->stream));
  impl_->end();
}

void NcclCommunicator::do_all_gather(const Tensor& in, Tensor out) {
  for (const Tensor* t : std::initializer_list<const Tensor*>{&in, &out})
    DT_CHECK(t->device.is_cuda(), "nccl communicator: all_gather of {} memory; it moves cuda memory only", t->device.str());
  check_gathered(in, out, "nccl");
  impl_->begin();
  const ncclDataType_t type = in.dtype == DType::bf16 ? ncclBfloat16 : ncclFloat;
  DT_NCCL(ncclAllGather(in.data, out.data, static_cast<size_t>(in.numel()), type, impl_->comm, impl_->stream));
  impl_->end();
}

void NcclCommunicator::do_broadcast(Tensor t, int root) {
  check_gpu_f32(t, "broadcast tensor");
  impl_->begin();
  DT_NCCL(ncclBroadcast(t.data, t.data, static_cast<size_t>(t.numel()), ncclFloat, root, impl_->comm, impl_->stream));
  impl_->end();
}

void NcclCommunicator::do_barrier() {
  // NCCL has no barrier: an all-reduce of one float, waited for on the host, orders every rank.
  float* one = nullptr;
  impl_->begin();
  DT_CUDA(cudaMalloc(&one, sizeof(float)));
  const ncclResult_t r = ncclAllReduce(one, one, 1, ncclFloat, ncclSum, impl_->comm, impl_->stream);
  const cudaError_t e = cudaStreamSynchronize(impl_->stream);
  cudaFree(one);
  DT_NCCL(r);
  DT_CUDA(e);
}

}  // namespace distrain
