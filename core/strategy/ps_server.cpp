#include "core/strategy/ps_server.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>

#include <fmt/ranges.h>

#include "core/base/error.hpp"
#include "core/io/checkpoint.hpp"
#include "core/model/model_state.hpp"
#include "core/optim/optimizer_state.hpp"
#include "core/optim/weight_decay.hpp"

namespace distrain {

namespace {

constexpr int64_t kFinished = INT64_MAX / 2;  // a finished worker's clock: it holds nobody back

}  // namespace

PsServer::PsServer(MpiCommunicator& world, const PsRanges& ranges, int64_t staleness, Model& layout,
                   const OptimizerSpec& optimizer)
    : world_(world), ranges_(ranges), staleness_(staleness), k_(world.rank()), lo_(ranges.begin(k_)),
      n_(ranges.length(k_)), layout_(layout), optimizer_spec_(optimizer), optimizer_(make_optimizer(optimizer)),
      values_(static_cast<size_t>(n_), 0.0f), message_(static_cast<size_t>(n_) + 1), sum_(static_cast<size_t>(n_)),
      workers_(world.size() - ranges.servers) {
  optimizer_->bind(layout.backend(), n_, within(decayed_ranges(layout.params()), ranges.range(k_)));
  pushed_.resize(static_cast<size_t>(workers_));
  clocks_.assign(static_cast<size_t>(workers_), 0);
  report_.server = k_;
  report_.parameters = n_;
}

void PsServer::load(const std::string& resume, const std::string& init_from, uint64_t seed) {
  const ParamArena& arena = layout_.params();
  for (size_t i = 0; i < arena.variables().size(); ++i) {  // the seed's values of each variable's part in the range
    const Variable& v = arena.variables()[i];
    const Range mine = intersect(range_of(v), ranges_.range(k_));
    if (!v.trainable || mine.empty()) continue;
    const std::vector<float> initial = arena.initial_value(static_cast<int>(i), seed);
    std::copy(initial.begin() + (mine.begin - v.offset), initial.begin() + (mine.end - v.offset),
              values_.begin() + (mine.begin - lo_));
  }
  const std::string source = resume.empty() ? init_from : resume;
  if (!source.empty()) {  // the whole model into the layout's arena, then our range
    ArenaModelState whole(layout_.params());
    load_weights(source, whole);
    std::vector<float> all(static_cast<size_t>(ranges_.arena));
    layout_.backend().download(layout_.params().values(), all.data());
    std::copy(all.begin() + lo_, all.begin() + lo_ + n_, values_.begin());
  }
  if (resume.empty()) return;
  // Slots: the checkpoint stores them whole; keep our range.
  auto whole = make_optimizer(optimizer_spec_);
  whole->bind(layout_.backend(), ranges_.arena, {});  // only its slots are read
  ArenaOptimizerState whole_state(*whole, layout_.backend());
  load_optimizer(resume, arena, whole_state);
  const auto from = whole->slots();
  const auto to = optimizer_->slots();
  for (size_t s = 0; s < to.size(); ++s) layout_.backend().copy(from[s].second.range(lo_, n_), to[s].second);
  optimizer_->set_iterations(whole->iterations());
}

ServeReport PsServer::serve() {
  int silent_periods = 0;
  while (done_ < workers_ || !pulls_.empty() || !snapshot_requests_.empty()) {
    const std::optional<MpiCommunicator::Incoming> next = world_.probe(world_.timeout());
    if (!next) {
      on_silence(++silent_periods);
      continue;
    }
    silent_periods = 0;
    const MpiCommunicator::Incoming m = *next;
    if (m.tag == kPull) on_pull(m.source);
    else if (m.tag == kPush) on_push(m.source);
    else if (m.tag == kDone) on_done(m.source);
    else if (m.tag == kGet) on_get(m.source);
    else if (m.tag == kSnapshot) on_snapshot(m.source);
    else throw Error(fmt::format("parameter_server: unexpected message tag {} from rank {}", m.tag, m.source));
    answer_ready_snapshots();
    answer_allowed_pulls();
  }
  return report_;
}

void PsServer::on_pull(int from) {
  double clock = 0;
  world_.recv(host_tensor(&clock, 1), from, kPull, "a pull");
  pulls_.emplace_back(from, static_cast<int64_t>(clock));
}

void PsServer::on_push(int from) {
  world_.recv(host_tensor(message_.data(), n_ + 1), from, kPush, "a push");
  const float lr = message_[0];
  const auto w = static_cast<size_t>(worker(from));
  if (staleness_ != 0) {
    applied_update(host_tensor(message_.data() + 1, n_), lr);
  } else {
    pushed_[w].assign(message_.begin() + 1, message_.end());
    if (++pushes_this_step_ == workers_) {  // in worker order: the sum does not depend on timing
      std::fill(sum_.begin(), sum_.end(), 0.0f);
      for (const auto& g : pushed_)
        for (size_t i = 0; i < sum_.size(); ++i) sum_[i] += g[i];
      applied_update(host_tensor(sum_.data(), n_), lr);
      pushes_this_step_ = 0;
    }
  }
  ++clocks_[w];
  const auto [slowest, fastest] = std::minmax_element(clocks_.begin(), clocks_.end());
  report_.max_lead = std::max(report_.max_lead, *fastest - *slowest);
}

void PsServer::applied_update(const Tensor& grads, float lr) {
  optimizer_->update(host_tensor(values_.data(), n_), grads, lr);
  ++report_.updates;
}

void PsServer::on_done(int from) {
  double none = 0;
  world_.recv(host_tensor(&none, 1), from, kDone, "a worker's end");
  ++done_;
  clocks_[static_cast<size_t>(worker(from))] = kFinished;
}

void PsServer::on_get(int from) {
  double what = 0;
  world_.recv(host_tensor(&what, 1), from, kGet, "a request");
  DT_CHECK(snapshot_.clock >= 0, "parameter_server: rank {} read the servers' state before asking for a snapshot", from);
  if (what == kGetIterations) {
    double iterations = static_cast<double>(snapshot_.iterations);
    world_.send(host_tensor(&iterations, 1), from, kGot, "the iteration count");
    return;
  }
  DT_CHECK(what >= 0 && what < static_cast<double>(snapshot_.slots.size()), "parameter_server: no slot {}", what);
  world_.send(host_tensor(snapshot_.slots[static_cast<size_t>(what)].data(), n_), from, kGot, "an optimizer slot");
}

void PsServer::on_snapshot(int from) {
  double clock = 0;
  world_.recv(host_tensor(&clock, 1), from, kSnapshot, "a snapshot request");
  snapshot_requests_.emplace_back(from, static_cast<int64_t>(clock));
}

// The snapshots every worker has now pushed far enough for. A request for the clock of
// the snapshot already taken reads that one: a worker that asked later (validation, then
// the checkpoint at the same step) sees the same state even if others have pushed since.
void PsServer::answer_ready_snapshots() {
  const int64_t slowest = *std::min_element(clocks_.begin(), clocks_.end());
  for (auto it = snapshot_requests_.begin(); it != snapshot_requests_.end();) {
    const auto [rank, clock] = *it;
    if (clock != snapshot_.clock) {
      if (slowest < clock) {
        ++it;
        continue;
      }
      take_snapshot(clock);
    }
    world_.send(host_tensor(snapshot_.values.data(), n_), rank, kGot, fmt::format("the parameters after step {}", clock));
    it = snapshot_requests_.erase(it);
  }
}

void PsServer::take_snapshot(int64_t clock) {
  snapshot_.clock = clock;
  snapshot_.iterations = optimizer_->iterations();
  snapshot_.values = values_;
  const auto slots = optimizer_->slots();
  snapshot_.slots.resize(slots.size());
  for (size_t s = 0; s < slots.size(); ++s) {
    snapshot_.slots[s].resize(static_cast<size_t>(n_));
    layout_.backend().download(slots[s].second, snapshot_.slots[s].data());
  }
}

// The pulls the staleness bound now allows (synchronous: the step's update is in).
void PsServer::answer_allowed_pulls() {
  const int64_t slowest = *std::min_element(clocks_.begin(), clocks_.end());
  for (auto it = pulls_.begin(); it != pulls_.end();) {
    if (staleness_ >= 0 && it->second - slowest > staleness_) {
      ++it;
      continue;
    }
    world_.send(host_tensor(values_.data(), n_), it->first, kValues, fmt::format("the parameters for step {}", it->second + 1));
    it = pulls_.erase(it);
  }
}

// No message for the world's timeout: a worker is stopped or hung. When one worker is
// behind the others it is the one, and the server names it. When they are level the
// stopped one is in a collective among the workers (an epoch's end), whose own timeout
// (twice the server's) names it; the server waits for that, and gives up itself only
// after a third period.
void PsServer::on_silence(int periods) {
  std::vector<int> busy, slowest;
  int64_t slowest_clock = kFinished;
  for (int w = 0; w < workers_; ++w) {
    const int64_t c = clocks_[static_cast<size_t>(w)];
    if (c == kFinished) continue;
    busy.push_back(w + ranges_.servers);
    if (c < slowest_clock) slowest_clock = c, slowest.clear();
    if (c == slowest_clock) slowest.push_back(w + ranges_.servers);
  }
  const bool level = slowest.size() == busy.size() && busy.size() > 1;
  if (level && periods < 3) return;
  world_.fail(fmt::format("server {} heard from no worker within {:g} s; workers not done: ranks {}; {} {} pushed {} "
                          "step(s); a rank may be stopped or hung; strategy.timeout_seconds sets this limit",
                          k_, world_.timeout() * periods, fmt::join(busy, ", "),
                          level ? "all" : slowest.size() == 1 ? "the slowest, rank" : "the slowest, ranks",
                          level ? "have" : fmt::format("{}, {}", fmt::join(slowest, ", "), slowest.size() == 1 ? "has" : "have"),
                          slowest_clock));
}

}  // namespace distrain
