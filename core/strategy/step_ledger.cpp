#include "core/strategy/step_ledger.hpp"

#include <algorithm>
#include <cmath>

#include "core/backend/backend.hpp"

namespace distrain {

int StepLedger::add_source(Backend& backend) {
  sources_.push_back(Source{&backend, Buffer(backend, Shape{kCapacity, 2})});
  backend.fill(sources_.back().slots.view(), 0.0f);  // rows a source leaves unwritten are read, not used
  return static_cast<int>(sources_.size()) - 1;
}

void StepLedger::begin_step() {
  DT_CHECK(!open_ && unread() < kCapacity, "a step ledger with {} unread steps{}", unread(), open_ ? " and one open" : "");
  rows_.push_back(Row{0, std::vector<int64_t>(sources_.size(), 0), std::nullopt, Check::none, std::nullopt});
  open_ = true;
}

// Sources write into their own element of the open row: replicas' threads may call this at once.
Tensor StepLedger::loss_slot(int source, int64_t examples) {
  DT_CHECK(open_ && source >= 0 && static_cast<size_t>(source) < sources_.size(), "loss slot of source {} of {}{}", source,
           sources_.size(), open_ ? "" : " outside a step");
  rows_.back().examples[static_cast<size_t>(source)] = examples;
  return sources_[static_cast<size_t>(source)].slots.view().range((unread() - 1) * 2, 2);
}

void StepLedger::record_losses(const LossStats& stats) {
  DT_CHECK(open_, "losses recorded outside a step");
  rows_.back().host_losses = stats;
}

void StepLedger::record_grad_norm(double norm) {
  DT_CHECK(open_, "a gradient norm recorded outside a step");
  rows_.back().grad_norm = norm;
}

void StepLedger::check(bool finite) {
  DT_CHECK(open_, "a check outside a step");
  rows_.back().check = finite ? Check::finite : Check::not_finite;
}

bool StepLedger::holds_known_failure() const {
  return std::any_of(rows_.begin(), rows_.end(), [](const Row& r) { return r.check == Check::not_finite; });
}

void StepLedger::check(Backend& backend, const Tensor& grads) {
  if (grads.device.is_cpu()) return check(all_finite(backend, grads));  // as cheap as the copy a read would make
  DT_CHECK(!check_backend_ || check_backend_ == &backend, "a step ledger checks gradients on one device");
  if (!check_backend_) {
    check_slots_ = Buffer(backend, Shape{kCapacity, kFinitenessColumns});
    check_backend_ = &backend;
  }
  finiteness_sums(backend, grads, check_slots_.view().range((unread() - 1) * kFinitenessColumns, kFinitenessColumns));
  rows_.back().check = Check::on_device;
}

void StepLedger::drop_open_step() {
  if (!open_) return;
  rows_.pop_back();
  open_ = false;
}

// In source order, as float32 values widened: the sums each replica's kernel made.
template <class PairOf>
LossStats StepLedger::row_losses(const Row& row, PairOf pair) {
  if (row.host_losses) return *row.host_losses;
  LossStats total;
  for (size_t s = 0; s < row.examples.size(); ++s)
    if (row.examples[s] > 0) {
      const float* v = pair(s);
      total += LossStats{v[0], static_cast<int64_t>(v[1]), row.examples[s]};
    }
  return total;
}

LossStats StepLedger::losses_now() {
  DT_CHECK(open_, "losses read outside a step");
  float v[2];
  return row_losses(rows_.back(), [&](size_t s) {
    sources_[s].backend->download(sources_[s].slots.view().range((unread() - 1) * 2, 2), v);
    return v;
  });
}

void StepLedger::commit(int64_t step) {
  DT_CHECK(open_ && rows_.back().check != Check::none, "step {} committed {}", step, open_ ? "unchecked" : "twice");
  rows_.back().step = step;
  open_ = false;
}

std::vector<StepResult> StepLedger::read() {
  DT_CHECK(!open_, "a step ledger read while a step is open");
  const int64_t n = unread();
  if (n == 0) return {};
  std::vector<std::vector<float>> losses(sources_.size());
  for (size_t s = 0; s < sources_.size(); ++s) {
    losses[s].resize(static_cast<size_t>(2 * n));
    sources_[s].backend->download(sources_[s].slots.view().range(0, 2 * n), losses[s].data());
  }
  std::vector<float> sums;
  if (check_backend_) {
    sums.resize(static_cast<size_t>(n * kFinitenessColumns));
    check_backend_->download(check_slots_.view().range(0, n * kFinitenessColumns), sums.data());
  }
  std::vector<StepResult> out;
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    bool finite = r.check == Check::finite;
    if (r.check == Check::on_device) {
      const auto first = sums.begin() + static_cast<int64_t>(i) * kFinitenessColumns;
      finite = std::all_of(first, first + kFinitenessColumns, [](float x) { return std::isfinite(x); });
    }
    out.push_back(StepResult{r.step, row_losses(r, [&](size_t s) { return &losses[s][2 * i]; }), finite, r.grad_norm});
  }
  rows_.clear();
  return out;
}

}  // namespace distrain
