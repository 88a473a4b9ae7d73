// Seams that keep no storage: a model with its shapes and layout and nothing allocated but
// the batch-norm state, for checks before the strategy's models exist and for the layout
// of a model whose variables live elsewhere (the stages of a pipeline).
#pragma once
#include <memory>

#include "core/model/model.hpp"

namespace distrain {

class NoValues final : public ParamGatherer {
 public:
  void attach(ParamArena&, const std::vector<Range>&) override {}
  void gather(size_t) override {}
  void release(size_t) override {}
  void before_update() override {}
  void after_update() override {}
  Tensor own() const override { return {}; }
  int64_t bytes() const override { return 0; }
  bool collective() const override { return false; }
};

class NoGradients final : public GradientReducer {
 public:
  void attach(ParamArena&, const std::vector<Range>&) override {}
  void zero() override {}
  void open(size_t) override {}
  void reduce(size_t) override {}
  void flush() override {}
  Tensor own() const override { return {}; }
  int64_t bytes() const override { return 0; }
};

inline ModelSeams storage_free_seams() { return ModelSeams{std::make_unique<NoValues>(), std::make_unique<NoGradients>()}; }

}  // namespace distrain
