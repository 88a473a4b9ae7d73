// Convolution on oneDNN primitives. Primitives depend on the
// batch size, so each op keeps one set per batch size seen (training batch, last partial
// batch, evaluation batch) and reuses it across steps.
#include <map>
#include <string_view>
#include <vector>

#include "core/backend/cpu/cpu_backend.hpp"
#include "core/backend/cpu/few_tap_filter_grad.hpp"

namespace distrain {

namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

memory wrap(const memory::desc& md, const dnnl::engine& eng, const Tensor& t) {
  DT_CHECK(t.bytes() == md.get_size(), "tensor {} does not match the primitive's {} bytes", t.shape.str(), md.get_size());
  return memory(md, eng, t.data);
}

// Adds scratch (n) into acc (n): oneDNN writes weight gradients, our contract accumulates.
void accumulate(const std::vector<float>& scratch, const Tensor& acc) {
  float* p = acc.f32();
  for (size_t i = 0; i < scratch.size(); ++i) p[i] += scratch[i];
}

// Each pass of a convolution (forward, backward data, backward weights) first asks oneDNN
// for a kernel on our own NHWC activations: where oneDNN has a JIT or brgemm kernel for
// them (AVX-512 machines) that saves reordering every activation to a blocked layout and back, which
// cost a third of the convnet's step. Where it would fall back to GEMM or a reference
// kernel (AVX2 in oneDNN 2.6), the pass lets oneDNN pick its layouts (format "any") and
// pays the reorders instead, which was faster there. Weights are always "any" (small).
// Measured with `distrain bench --profile` (docs/BENCHMARKS.md).
template <typename Pd, typename Make>
Pd prefer_plain(Make make) {
  Pd pd = make(true);
  const std::string_view impl = pd.impl_info_str();
  if (impl.starts_with("jit") || impl.starts_with("brg")) return pd;
  return make(false);
}
class OneDnnConv2D final : public Conv2DOp {
 public:
  OneDnnConv2D(CpuBackend& be, const Conv2DSpec& s) : be_(be), s_(s) {}

  void forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor y) override {
    Prims& p = prims(x.shape[0]);
    std::vector<Arg> args{{DNNL_ARG_SRC, p.x, x, false}, {DNNL_ARG_WEIGHTS, p.w, w, false}, {DNNL_ARG_DST, p.y, y, true}};
    if (s_.bias) args.push_back({DNNL_ARG_BIAS, p.b, b, false});
    run(p.fwd, p.fwd_pd, args, p.staging_fwd);
  }

  void backward_data(const Tensor& dy, const Tensor& w, Tensor dx) override {
    Prims& p = prims(dy.shape[0]);
    if (!p.bwd_data) {
      using Pd = dnnl::convolution_backward_data::primitive_desc;
      p.bwd_data_pd = prefer_plain<Pd>([&](bool plain) {
        dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, act(p.x, plain), any(p.w),
                                                act(p.y, plain), strides(), pad_l(), pad_r());
        return Pd(d, eng(), p.fwd_pd);
      });
      p.bwd_data = dnnl::convolution_backward_data(p.bwd_data_pd);
    }
    run(p.bwd_data, p.bwd_data_pd,
        {{DNNL_ARG_DIFF_DST, p.y, dy, false}, {DNNL_ARG_WEIGHTS, p.w, w, false}, {DNNL_ARG_DIFF_SRC, p.x, dx, true}},
        p.staging_bwd_data);
  }

  void backward_weights(const Tensor& x, const Tensor& dy, const Tensor& relu_y, Tensor dw, Tensor db) override {
    if (few_taps(s_)) {
      few_tap_filter_grad(s_, x.shape[0], x.f32(), dy.f32(), relu_y.empty() ? nullptr : relu_y.f32(), dw.f32(),
                          s_.bias && !db.empty() ? db.f32() : nullptr);
      return;
    }
    if (!relu_y.empty()) be_.relu_backward(relu_y, dy, dy);
    Prims& p = prims(x.shape[0]);
    if (!p.bwd_weights) {
      using Pd = dnnl::convolution_backward_weights::primitive_desc;
      p.bwd_weights_pd = prefer_plain<Pd>([&](bool plain) {
        const auto direct = dnnl::algorithm::convolution_direct;
        auto d = s_.bias ? dnnl::convolution_backward_weights::desc(direct, act(p.x, plain), any(p.w), p.b, act(p.y, plain),
                                                                    strides(), pad_l(), pad_r())
                         : dnnl::convolution_backward_weights::desc(direct, act(p.x, plain), any(p.w), act(p.y, plain),
                                                                    strides(), pad_l(), pad_r());
        return Pd(d, eng(), p.fwd_pd);
      });
      p.bwd_weights = dnnl::convolution_backward_weights(p.bwd_weights_pd);
    }
    dw_scratch_.resize(static_cast<size_t>(dw.numel()));
    Tensor dw_out{dw_scratch_.data(), dw.shape, DType::f32, dw.device};
    std::vector<Arg> args{{DNNL_ARG_SRC, p.x, x, false}, {DNNL_ARG_DIFF_DST, p.y, dy, false},
                          {DNNL_ARG_DIFF_WEIGHTS, p.w, dw_out, true}};
    if (s_.bias) {
      db_scratch_.resize(static_cast<size_t>(s_.out_c));
      args.push_back({DNNL_ARG_DIFF_BIAS, p.b, Tensor{db_scratch_.data(), Shape{s_.out_c}, DType::f32, dw.device}, true});
    }
    run(p.bwd_weights, p.bwd_weights_pd, args, p.staging_bwd_weights);
    accumulate(dw_scratch_, dw);
    if (s_.bias && !db.empty()) accumulate(db_scratch_, db);
  }

 private:
  // One argument of a primitive: our tensor and its layout; `output` ones are copied
  // back from the primitive's layout after it ran.
  struct Arg {
    int id;
    memory::desc plain;
    Tensor tensor;
    bool output;
  };

  struct Prims {
    memory::desc x, w, b, y;  // our layouts
    dnnl::convolution_forward::primitive_desc fwd_pd;
    dnnl::convolution_forward fwd;
    dnnl::convolution_backward_data::primitive_desc bwd_data_pd;
    dnnl::convolution_backward_data bwd_data;
    dnnl::convolution_backward_weights::primitive_desc bwd_weights_pd;
    dnnl::convolution_backward_weights bwd_weights;
    std::map<int, memory> staging_fwd, staging_bwd_data, staging_bwd_weights;  // buffers in oneDNN's layouts
  };

  static memory::desc any(const memory::desc& d) { return memory::desc(d.dims(), f32, tag::any); }
  // An activation's layout for a pass: ours (NHWC), or oneDNN's choice.
  static memory::desc act(const memory::desc& d, bool plain) { return plain ? d : any(d); }

  void run(dnnl::primitive& prim, const dnnl::primitive_desc& pd, const std::vector<Arg>& args,
           std::map<int, memory>& staging) {
    std::unordered_map<int, memory> exec;
    std::vector<std::pair<memory, memory>> copy_back;
    for (const Arg& a : args) {
      memory ours = wrap(a.plain, eng(), a.tensor);
      const memory::desc wanted = pd.query_md(dnnl::query::exec_arg_md, a.id);
      if (wanted == a.plain) {
        exec.emplace(a.id, ours);
        continue;
      }
      memory& staged = staging[a.id];
      if (!staged || staged.get_desc() != wanted) staged = memory(wanted, eng());
      if (a.output)
        copy_back.emplace_back(staged, ours);
      else
        dnnl::reorder(ours, staged).execute(be_.stream(), ours, staged);
      exec.emplace(a.id, staged);
    }
    prim.execute(be_.stream(), exec);
    for (auto& [from, to] : copy_back) dnnl::reorder(from, to).execute(be_.stream(), from, to);
    be_.stream().wait();
  }

  const dnnl::engine& eng() { return be_.engine(); }
  memory::dims strides() const { return {s_.stride_h, s_.stride_w}; }
  memory::dims pad_l() const { return {s_.pad_top, s_.pad_left}; }
  memory::dims pad_r() const { return {s_.pad_bottom, s_.pad_right}; }

  Prims& prims(int64_t n) {
    auto it = cache_.find(n);
    if (it != cache_.end()) return it->second;
    Prims p;
    // oneDNN describes tensors by logical NCHW / OIHW dims; the tags give our physical layouts.
    p.x = memory::desc({n, s_.in_c, s_.in_h, s_.in_w}, f32, tag::nhwc);
    p.w = memory::desc({s_.out_c, s_.in_c, s_.kernel_h, s_.kernel_w}, f32, tag::hwio);
    p.b = memory::desc({s_.out_c}, f32, tag::x);
    p.y = memory::desc({n, s_.out_c, s_.out_h, s_.out_w}, f32, tag::nhwc);
    dnnl::primitive_attr attr;
    if (s_.relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
      attr.set_post_ops(ops);
    }
    using Pd = dnnl::convolution_forward::primitive_desc;
    p.fwd_pd = prefer_plain<Pd>([&](bool plain) {
      const auto training = dnnl::prop_kind::forward_training;
      const auto direct = dnnl::algorithm::convolution_direct;
      auto d = s_.bias ? dnnl::convolution_forward::desc(training, direct, act(p.x, plain), any(p.w), p.b, act(p.y, plain),
                                                         strides(), pad_l(), pad_r())
                       : dnnl::convolution_forward::desc(training, direct, act(p.x, plain), any(p.w), act(p.y, plain),
                                                         strides(), pad_l(), pad_r());
      return Pd(d, attr, eng());
    });
    p.fwd = dnnl::convolution_forward(p.fwd_pd);
    return cache_.emplace(n, std::move(p)).first->second;
  }

  CpuBackend& be_;
  Conv2DSpec s_;
  std::map<int64_t, Prims> cache_;
  std::vector<float> dw_scratch_, db_scratch_;
};

}  // namespace

std::unique_ptr<Conv2DOp> CpuBackend::make_conv2d(const Conv2DSpec& spec) {
  return std::make_unique<OneDnnConv2D>(*this, spec);
}


}  // namespace distrain
