// Optimizer first steps against closed forms, and learning-rate schedule values.
#include <cmath>

#include "core/optim/lr_schedule.hpp"
#include "core/optim/optimizer.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

std::vector<float> run_steps(const OptimizerSpec& spec, std::vector<float> p, const std::vector<std::vector<float>>& grads,
                             float lr) {
  Backend& be = cpu();
  const auto n = static_cast<int64_t>(p.size());
  Buffer bp(be, Shape{n}), bg(be, Shape{n});
  from_host(p, bp.view());
  auto opt = make_optimizer(spec);
  opt->bind(be, n, {{0, n}});
  for (const auto& g : grads) {
    from_host(g, bg.view());
    opt->update(bp.view(), bg.view(), lr);
  }
  CHECK(opt->iterations() == static_cast<int64_t>(grads.size()));
  return to_host(bp.view());
}

}  // namespace

TEST_CASE("sgd: plain, momentum, nesterov, weight decay") {
  CHECK(run_steps(default_optimizer_spec("sgd"), {1.0f}, {{0.5f}}, 0.1f)[0] == doctest::Approx(0.95));
  OptimizerSpec m = default_optimizer_spec("sgd");
  m.momentum = 0.9;
  // v1 = -0.1*1 = -0.1, p = 0.9; v2 = 0.9*-0.1 - 0.1*2 = -0.29, p = 0.61
  CHECK(run_steps(m, {1.0f}, {{1.0f}, {2.0f}}, 0.1f)[0] == doctest::Approx(0.61));
  m.nesterov = true;
  // v1 = -0.1, p = 1 + 0.9*-0.1 - 0.1 = 0.81
  CHECK(run_steps(m, {1.0f}, {{1.0f}}, 0.1f)[0] == doctest::Approx(0.81));
  OptimizerSpec wd = default_optimizer_spec("sgd");
  wd.weight_decay = 0.5;
  // p = 2 - 2*0.5*0.1 - 0.1*1 = 1.8
  CHECK(run_steps(wd, {2.0f}, {{1.0f}}, 0.1f)[0] == doctest::Approx(1.8));
}

TEST_CASE("adam and adamw: first two steps in closed form (Keras 3 rule)") {
  const OptimizerSpec a = default_optimizer_spec("adam");
  CHECK(a.learning_rate == 0.001);
  CHECK(a.epsilon == 1e-7);
  auto expected = [](double p, double wd, std::vector<double> gs, double lr) {
    double m = 0, v = 0;
    for (size_t t = 1; t <= gs.size(); ++t) {
      const double g = gs[t - 1];
      p -= p * wd * lr;
      m += (g - m) * 0.1;
      v += (g * g - v) * 0.001;
      const double alpha = lr * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
      p -= alpha * m / (std::sqrt(v) + 1e-7);
    }
    return p;
  };
  CHECK(run_steps(a, {0.5f}, {{0.2f}}, 0.01f)[0] == doctest::Approx(expected(0.5, 0, {0.2}, 0.01)).epsilon(1e-6));
  CHECK(run_steps(a, {0.5f}, {{0.2f}, {-0.4f}}, 0.01f)[0] ==
        doctest::Approx(expected(0.5, 0, {0.2, -0.4}, 0.01)).epsilon(1e-6));
  const OptimizerSpec w = default_optimizer_spec("adamw");
  CHECK(w.weight_decay == 0.004);
  CHECK(run_steps(w, {0.5f}, {{0.2f}, {0.1f}}, 0.01f)[0] ==
        doctest::Approx(expected(0.5, 0.004, {0.2, 0.1}, 0.01)).epsilon(1e-6));
}

TEST_CASE("unknown optimizer is a user error naming the known ones") {
  OptimizerSpec s;
  s.type = "rmsprop";
  CHECK_THROWS_WITH_AS(make_optimizer(s), doctest::Contains("known: sgd, adam, adamw"), UserError);
}

TEST_CASE("learning-rate scaling rules, warm-up and decays") {
  ScheduleSpec s;
  s.base_batch = 64;
  CHECK(LrSchedule(0.1, s, 256, 1000).peak() == doctest::Approx(0.4));  // linear
  s.scaling = "sqrt";
  CHECK(LrSchedule(0.1, s, 256, 1000).peak() == doctest::Approx(0.2));
  s.scaling = "none";
  CHECK(LrSchedule(0.1, s, 256, 1000).peak() == doctest::Approx(0.1));
  s.table = {{256, 0.33}};
  CHECK(LrSchedule(0.1, s, 256, 1000).peak() == doctest::Approx(0.33));
  CHECK(LrSchedule(0.1, s, 128, 1000).peak() == doctest::Approx(0.1));  // not in the table: the rule

  ScheduleSpec w;
  w.base_batch = 64;
  w.warmup_steps = 10;
  w.decay = "cosine";
  const LrSchedule cos(0.1, w, 64, 110);  // 100 decay steps after warm-up
  CHECK(cos.at(0) == doctest::Approx(0.01));
  CHECK(cos.at(4) == doctest::Approx(0.05));
  CHECK(cos.at(10) == doctest::Approx(0.1));
  CHECK(cos.at(60) == doctest::Approx(0.05));
  CHECK(cos.at(110) == doctest::Approx(0.0));
  CHECK(cos.at(500) == doctest::Approx(0.0));

  ScheduleSpec st;
  st.base_batch = 64;
  st.decay = "step";
  st.decay_steps = 100;
  st.decay_rate = 0.5;
  const LrSchedule step(0.1, st, 64, 1000);
  CHECK(step.at(99) == doctest::Approx(0.1));
  CHECK(step.at(100) == doctest::Approx(0.05));
  CHECK(step.at(250) == doctest::Approx(0.025));
  st.decay = "exponential";
  CHECK(LrSchedule(0.1, st, 64, 1000).at(50) == doctest::Approx(0.1 * std::pow(0.5, 0.5)));

  ScheduleSpec bad;
  bad.base_batch = 64;
  bad.scaling = "cubic";
  CHECK_THROWS_AS(LrSchedule(0.1, bad, 64, 10), UserError);
}

// A schedule the run's steps do not cover says so: a warm-up longer than the run (the
// copied Shakespeare recipe at 84 steps), a cosine decay longer than what follows warm-up.
TEST_CASE("learning-rate schedule: a warm-up or decay the run cannot finish is named") {
  ScheduleSpec w;
  w.base_batch = 12;
  w.warmup_steps = 100;
  w.decay = "cosine";
  const LrSchedule short_run(0.001, w, 12, 84);
  CHECK(short_run.describe().find("no steps left for the cosine decay") != std::string::npos);
  CHECK(short_run.unfinished() ==
        "the warm-up of 100 steps is longer than the run's 84 steps: the learning rate never reaches its peak 0.001 and "
        "ends at 0.00084; lower optimizer.schedule.warmup_steps or raise train.steps or train.epochs");
  CHECK(LrSchedule(0.001, w, 12, 100).unfinished().find("none is left for the cosine decay") != std::string::npos);
  CHECK(LrSchedule(0.001, w, 12, 101).unfinished().empty());
  CHECK(LrSchedule(0.001, w, 12, 2000).unfinished().empty());  // decay over the steps after warm-up
  w.decay_steps = 400;
  const LrSchedule long_decay(0.001, w, 12, 300);
  CHECK(long_decay.unfinished().find("the cosine decay over 400 steps outlasts the run's 200 steps after warm-up: the "
                                     "learning rate ends at") != std::string::npos);
  CHECK(LrSchedule(0.001, w, 12, 500).unfinished().empty());
  w.decay = "step";  // decay_steps is the period there: nothing to finish
  CHECK(LrSchedule(0.001, w, 12, 300).unfinished().empty());
}

}  // namespace distrain::test
