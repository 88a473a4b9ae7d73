// Convolution on cuDNN, NHWC. Keras stores kernels as (kh, kw, in, out), which no cuDNN
// filter layout is, so each call transposes the (small) kernel to cuDNN's NHWC filter
// layout (out, kh, kw, in) and its gradient back. cuDNN pads symmetrically only; the
// asymmetric "same" padding of TensorFlow (stride 2, even size) pads the input
// explicitly into a scratch buffer instead.
//
// Algorithms are chosen once per batch size with cudnnFind (measured on this GPU),
// preferring deterministic ones so that reruns give the same weights; without
// train.allow_tf32 only FMA (true float32) math is allowed. The kernel gradient may go
// instead to matrix products (GemmFilterGrad, also deterministic) when they measure faster.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>

#include "core/backend/cuda/cuda_backend.hpp"
#include "core/backend/cuda/cuda_check.hpp"
#include "core/backend/cuda/gemm_filter_grad.hpp"
#include "core/backend/cuda/kernels.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

namespace {

constexpr size_t kMaxWorkspace = size_t{1} << 30;  // algorithms needing more are skipped

// How the kernel gradient is computed: the faster of cuDNN and GemmFilterGrad, measured,
// unless DISTRAIN_CUDA_FILTER_GRAD says `gemm` or `cudnn` (for tests and comparisons).
enum class FilterGrad { measured, gemm, cudnn };

FilterGrad filter_grad_choice() {
  const char* v = std::getenv("DISTRAIN_CUDA_FILTER_GRAD");
  const std::string s = v ? v : "";
  if (s.empty() || s == "auto") return FilterGrad::measured;
  if (s == "gemm") return FilterGrad::gemm;
  if (s == "cudnn") return FilterGrad::cudnn;
  throw UserError(fmt::format("DISTRAIN_CUDA_FILTER_GRAD={}: expected auto, gemm or cudnn", s));
}

// The first usable result of a cudnnFind list (sorted fastest first), deterministic if any is.
template <typename Perf>
const Perf& pick(const Perf* perf, int count, const char* what) {
  const Perf* any = nullptr;
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > kMaxWorkspace) continue;
    if (perf[i].determinism == CUDNN_DETERMINISTIC) return perf[i];
    if (!any) any = &perf[i];
  }
  if (any) return *any;
  throw Error(fmt::format("cudnn: no {} algorithm works for this convolution", what));
}

class CudnnConv2D final : public Conv2DOp {
 public:
  CudnnConv2D(CudaBackend& be, const Conv2DSpec& s) : be_(be), s_(s) {
    explicit_pad_ = s.pad_top != s.pad_bottom || s.pad_left != s.pad_right;
    in_h_ = s.in_h + (explicit_pad_ ? s.pad_top + s.pad_bottom : 0);
    in_w_ = s.in_w + (explicit_pad_ ? s.pad_left + s.pad_right : 0);
    auto lock = be_.enter();
    DT_CUDNN(cudnnCreateFilterDescriptor(&wdesc_));
    DT_CUDNN(cudnnSetFilter4dDescriptor(wdesc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, static_cast<int>(s.out_c),
                                        static_cast<int>(s.in_c), static_cast<int>(s.kernel_h), static_cast<int>(s.kernel_w)));
    w_ohwi_ = Buffer(be_, Shape{s.out_c, s.kernel_h, s.kernel_w, s.in_c});
    dw_ohwi_ = Buffer(be_, Shape{s.out_c, s.kernel_h, s.kernel_w, s.in_c});
  }

  ~CudnnConv2D() override {
    for (auto& [n, p] : plans_) p.destroy();
    cudnnDestroyFilterDescriptor(wdesc_);
  }

  void forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor y) override {
    auto lock = be_.enter();
    Plan& p = plan(x.shape[0]);
    to_ohwi(w);
    const float* in = padded_input(x, p);
    const float one = 1.0f, zero = 0.0f;
    DT_CUDNN(cudnnConvolutionForward(be_.cudnn(), &one, p.x, in, wdesc_, w_ohwi_.view().f32(), p.fwd_conv, p.fwd,
                                     be_.workspace(p.workspace), p.workspace, &zero, p.y, y.f32()));
    if (!b.empty() || s_.relu)
      cuda::bias_relu(y.f32(), b.empty() ? nullptr : b.f32(), y.numel(), s_.out_c, s_.relu, be_.stream());
  }

  void backward_data(const Tensor& dy, const Tensor& w, Tensor dx) override {
    auto lock = be_.enter();
    Plan& p = plan(dy.shape[0]);
    to_ohwi(w);
    const float one = 1.0f, zero = 0.0f;
    float* out = explicit_pad_ ? p.padded.view().f32() : dx.f32();
    DT_CUDNN(cudnnConvolutionBackwardData(be_.cudnn(), &one, wdesc_, w_ohwi_.view().f32(), p.y, dy.f32(), p.data_conv,
                                          p.data, be_.workspace(p.workspace), p.workspace, &zero, p.x, out));
    if (explicit_pad_)
      cuda::crop_nhwc(out, dx.f32(), dx.shape[0], s_.in_h, s_.in_w, s_.in_c, s_.pad_top, s_.pad_left, in_h_, in_w_,
                      be_.stream());
  }

  void backward_weights(const Tensor& x, const Tensor& dy, const Tensor& relu_y, Tensor dw, Tensor db) override {
    if (!relu_y.empty()) be_.relu_backward(relu_y, dy, dy);
    auto lock = be_.enter();
    Plan& p = plan(x.shape[0]);
    if (!p.filter_chosen) choose_filter_grad(p, x.shape[0]);
    if (p.gemm_filter) {
      p.gemm_filter->accumulate(x.f32(), dy.f32(), dw.f32());  // pads as it goes: the unpadded input
      if (!db.empty()) be_.bias_grad(dy.reshaped(Shape{dy.numel() / s_.out_c, s_.out_c}), db);
      return;
    }
    const float* in = padded_input(x, p);
    const float one = 1.0f, zero = 0.0f;
    DT_CUDNN(cudnnConvolutionBackwardFilter(be_.cudnn(), &one, p.x, in, p.y, dy.f32(), p.filter_conv, p.filter,
                                            be_.workspace(p.workspace), p.workspace, &zero, wdesc_,
                                            dw_ohwi_.view().f32()));
    cuda::add_ohwi_to_hwio(dw_ohwi_.view().f32(), dw.f32(), s_.kernel_h * s_.kernel_w, s_.in_c, s_.out_c, be_.stream());
    if (!db.empty()) be_.bias_grad(dy.reshaped(Shape{dy.numel() / s_.out_c, s_.out_c}), db);
  }

 private:
  // Descriptors and algorithms for one batch size. Each direction has its own
  // convolution descriptor, as each may run with a different math type.
  struct Plan {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnConvolutionDescriptor_t fwd_conv = nullptr, data_conv = nullptr, filter_conv = nullptr;
    cudnnConvolutionFwdAlgo_t fwd{};
    cudnnConvolutionBwdDataAlgo_t data{};
    cudnnConvolutionBwdFilterAlgo_t filter{};
    size_t workspace = 0;
    Buffer padded;  // the explicitly padded input or its gradient
    std::unique_ptr<GemmFilterGrad> gemm_filter;  // the kernel gradient, when faster than cuDNN's
    double cudnn_filter_ms = 0;                   // cuDNN's time for it, from cudnnFind
    bool filter_chosen = false;                   // at the first backward_weights of this batch size
    void destroy() {
      cudnnDestroyTensorDescriptor(x);
      cudnnDestroyTensorDescriptor(y);
      cudnnDestroyConvolutionDescriptor(fwd_conv);
      cudnnDestroyConvolutionDescriptor(data_conv);
      cudnnDestroyConvolutionDescriptor(filter_conv);
    }
  };

  cudnnConvolutionDescriptor_t make_conv() const {
    cudnnConvolutionDescriptor_t c = nullptr;
    DT_CUDNN(cudnnCreateConvolutionDescriptor(&c));
    const int ph = explicit_pad_ ? 0 : static_cast<int>(s_.pad_top), pw = explicit_pad_ ? 0 : static_cast<int>(s_.pad_left);
    DT_CUDNN(cudnnSetConvolution2dDescriptor(c, ph, pw, static_cast<int>(s_.stride_h), static_cast<int>(s_.stride_w), 1, 1,
                                             CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DT_CUDNN(cudnnSetConvolutionMathType(c, be_.tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    return c;
  }

  // With TF32 off, whatever algorithm was found runs in FMA math.
  void settle_math(cudnnConvolutionDescriptor_t c, cudnnMathType_t found) const {
    DT_CUDNN(cudnnSetConvolutionMathType(c, be_.tf32() ? found : CUDNN_FMA_MATH));
  }

  Plan& plan(int64_t n) {
    auto it = plans_.find(n);
    if (it != plans_.end()) return it->second;
    Plan p;
    DT_CUDNN(cudnnCreateTensorDescriptor(&p.x));
    DT_CUDNN(cudnnCreateTensorDescriptor(&p.y));
    DT_CUDNN(cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                        static_cast<int>(s_.in_c), static_cast<int>(in_h_), static_cast<int>(in_w_)));
    DT_CUDNN(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                        static_cast<int>(s_.out_c), static_cast<int>(s_.out_h), static_cast<int>(s_.out_w)));
    p.fwd_conv = make_conv();
    p.data_conv = make_conv();
    p.filter_conv = make_conv();
    int dims[4] = {};
    DT_CUDNN(cudnnGetConvolutionNdForwardOutputDim(p.fwd_conv, p.x, wdesc_, 4, dims));
    DT_CHECK(dims[0] == n && dims[1] == s_.out_c && dims[2] == s_.out_h && dims[3] == s_.out_w,
             "cudnn output {}x{}x{}x{} differs from the layer's ({}, {}, {}, {})", dims[0], dims[1], dims[2], dims[3], n,
             s_.out_h, s_.out_w, s_.out_c);
    int found = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    DT_CUDNN(cudnnFindConvolutionForwardAlgorithm(be_.cudnn(), p.x, wdesc_, p.fwd_conv, p.y,
                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, fwd));
    const auto& f = pick(fwd, found, "forward");
    p.fwd = f.algo;
    settle_math(p.fwd_conv, f.mathType);
    cudnnConvolutionBwdDataAlgoPerf_t data[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    DT_CUDNN(cudnnFindConvolutionBackwardDataAlgorithm(be_.cudnn(), wdesc_, p.y, p.data_conv, p.x,
                                                       CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, data));
    const auto& d = pick(data, found, "backward-data");
    p.data = d.algo;
    settle_math(p.data_conv, d.mathType);
    cudnnConvolutionBwdFilterAlgoPerf_t filter[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    DT_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithm(be_.cudnn(), p.x, p.y, p.filter_conv, wdesc_,
                                                         CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, filter));
    const auto& g = pick(filter, found, "backward-filter");
    p.filter = g.algo;
    settle_math(p.filter_conv, g.mathType);
    p.cudnn_filter_ms = static_cast<double>(g.time);
    // The sizes for the settled math types.
    size_t a = 0, b = 0, c = 0;
    DT_CUDNN(cudnnGetConvolutionForwardWorkspaceSize(be_.cudnn(), p.x, wdesc_, p.fwd_conv, p.y, p.fwd, &a));
    DT_CUDNN(cudnnGetConvolutionBackwardDataWorkspaceSize(be_.cudnn(), wdesc_, p.y, p.data_conv, p.x, p.data, &b));
    DT_CUDNN(cudnnGetConvolutionBackwardFilterWorkspaceSize(be_.cudnn(), p.x, p.y, p.filter_conv, wdesc_, p.filter, &c));
    p.workspace = std::max({a, b, c, size_t{256}});
    if (explicit_pad_) p.padded = Buffer(be_, Shape{n, in_h_, in_w_, s_.in_c});
    return plans_.emplace(n, std::move(p)).first->second;
  }

  // Only batch sizes that train get here (evaluation has no backward pass). A GemmFilterGrad
  // that cannot get its memory, or measures slower, leaves the kernel gradient to cuDNN.
  void choose_filter_grad(Plan& p, int64_t n) {
    p.filter_chosen = true;
    const FilterGrad choice = filter_grad_choice();
    if (choice == FilterGrad::cudnn || !GemmFilterGrad::applies(s_, n)) return;
    try {
      auto gemm = std::make_unique<GemmFilterGrad>(be_, s_, n);
      if (choice == FilterGrad::gemm || gemm->time_ms() < p.cudnn_filter_ms) p.gemm_filter = std::move(gemm);
    } catch (const UserError&) {  // out of device memory: cuDNN needs none of it
      if (choice == FilterGrad::gemm) throw;
    }
  }

  void to_ohwi(const Tensor& w) {
    cuda::hwio_to_ohwi(w.f32(), w_ohwi_.view().f32(), s_.kernel_h * s_.kernel_w, s_.in_c, s_.out_c, be_.stream());
  }

  const float* padded_input(const Tensor& x, Plan& p) {
    if (!explicit_pad_) return x.f32();
    cuda::pad_nhwc(x.f32(), p.padded.view().f32(), x.shape[0], s_.in_h, s_.in_w, s_.in_c, s_.pad_top, s_.pad_left, in_h_,
                   in_w_, be_.stream());
    return p.padded.view().f32();
  }

  CudaBackend& be_;
  Conv2DSpec s_;
  bool explicit_pad_ = false;
  int64_t in_h_ = 0, in_w_ = 0;  // the input as cuDNN sees it (after explicit padding)
  cudnnFilterDescriptor_t wdesc_ = nullptr;
  Buffer w_ohwi_, dw_ohwi_;
  std::map<int64_t, Plan> plans_;
};

}  // namespace

std::unique_ptr<Conv2DOp> CudaBackend::make_conv2d(const Conv2DSpec& spec) {
  return std::make_unique<CudnnConv2D>(*this, spec);
}

}  // namespace distrain
