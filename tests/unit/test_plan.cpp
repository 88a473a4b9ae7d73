// distrain plan's parts: the layouts it weighs, the recipes it makes of them, the links it
// parses and the step times it predicts from a profile (core/plan/*.hpp).
#include <doctest/doctest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/plan/device_rate.hpp"
#include "core/plan/mesh_plan.hpp"
#include "core/plan/plan_cost.hpp"
#include "core/plan/plan_layouts.hpp"
#include "core/plan/plan_pipeline.hpp"
#include "core/base/error.hpp"
#include "core/model/model.hpp"
#include "core/model/model_spec.hpp"
#include "core/model/no_storage.hpp"
#include "core/backend/backend.hpp"
#include "core/io/recipe.hpp"
#include "core/strategy/zero_memory.hpp"

using namespace distrain;

namespace {

Recipe shakespeare() {
  return load_recipe(std::string(DISTRAIN_SOURCE_DIR) + "/recipes/shakespeare_char_gpt.toml",
                     {"data.path=\"" + std::string(DISTRAIN_SOURCE_DIR) + "/data/tiny_shakespeare.txt\""});
}

// Every layer of `recipe`'s model takes 1 ms forward and 2 ms backward; the update 1 ms.
LayerTimes flat_times(const Recipe& recipe) {
  LayerTimes t;
  for (const auto& l : recipe.model().layers) t.layer_ms[l.prototype->name()] = {1.0, 2.0};
  t.update_ms = 1.0;
  t.value_bytes = mesh_rank_bytes(layout_recipe(recipe, PlanLayout{}, 12)).at(0).values;
  return t;
}

}  // namespace

TEST_CASE("plan: layouts keep tensor inside a host and split the global batch evenly") {
  const Cluster cluster{8, 2};
  const std::vector<PlanLayout> all = enumerate_layouts(cluster, 24, 4, 40);
  std::set<std::string> names;
  for (const PlanLayout& l : all) {
    CHECK(l.data * l.tensor * l.pipeline == 8);
    CHECK(cluster.per_host() % l.tensor == 0);  // tensor 1, 2 or 4 on hosts of 4
    CHECK(24 % l.data == 0);
    CHECK((24 / l.data) % l.micro_batches == 0);
    CHECK_FALSE((l.shard_optimizer && l.data == 1));
    CHECK_FALSE((l.sequence_parallel && l.tensor == 1));
    names.insert(l.str());
  }
  CHECK(names.size() == all.size());  // no layout twice
  CHECK(names.count("data 8"));
  CHECK(names.count("data 2 x tensor 4, SP, ZeRO-1"));
  CHECK(names.count("data 1 x tensor 4 x pipeline 2 (8 micro-batches), recompute, offload"));
  for (const PlanLayout& l : all) CHECK(l.tensor <= 4);
  // Of 3 ranks and a batch of 4: data 3 does not divide it, nor pipeline 3 micro-batches;
  // tensor 3 with its options (SP, offload), each accumulating 1, 2 or 4 micro-batches.
  CHECK(enumerate_layouts(Cluster{3, 1}, 4, 0, 40).size() == 12);
}

TEST_CASE("plan: a layout's recipe is a mesh recipe with its keys, from any strategy") {
  const Recipe base = shakespeare();
  const PlanLayout l{2, 2, 1, 1, true, true, true, false};
  const Recipe r = layout_recipe(base, l, 12);
  CHECK(r.strategy.name == "mesh");
  CHECK(r.strategy.mesh.data == 2);
  CHECK(r.strategy.mesh.tensor == 2);
  CHECK(r.strategy.per_replica_batch == 6);
  CHECK(r.strategy.mesh.shard_optimizer);
  CHECK(r.strategy.mesh.sequence_parallel);
  CHECK(r.train.recompute_blocks);
  // The --set form says the same: applied to the one_device recipe it gives this recipe.
  const Recipe again = load_recipe(std::string(DISTRAIN_SOURCE_DIR) + "/recipes/shakespeare_char_gpt.toml", [&] {
    std::vector<std::string> sets = layout_overrides(l, 12);
    sets.push_back("data.path=\"" + std::string(DISTRAIN_SOURCE_DIR) + "/data/tiny_shakespeare.txt\"");
    return sets;
  }());
  CHECK(again.resolved_text() == r.resolved_text());
  // Heads that do not split over the tensor degree are the model's to refuse.
  CHECK_THROWS_AS(mesh_rank_bytes(layout_recipe(base, PlanLayout{1, 8, 1}, 12)), UserError);
}

TEST_CASE("plan: the profile runs on the first blocks with no budget, and they stand for the rest") {
  Recipe base = load_recipe(std::string(DISTRAIN_SOURCE_DIR) + "/recipes/gpt_bigger_than_a_device.toml",
                            {"data.path=\"" + std::string(DISTRAIN_SOURCE_DIR) + "/data/tiny_shakespeare.txt\""});
  REQUIRE(base.strategy.device_memory > 0);
  const Recipe p = profile_recipe(base, 2, false, 1);
  CHECK(p.strategy.name == "one_device");
  CHECK(p.strategy.per_replica_batch == 2);
  CHECK(p.strategy.threads == 1);
  CHECK(p.strategy.device_memory == 0);
  CHECK(base.model().blocks == 16);
  CHECK(p.model().blocks == kProfiledBlocks);
  CHECK(p.model().layers.size() == base.model().layers.size() - 14 * 8);  // 8 layers a block
  std::set<std::string> profiled;
  for (const LayerSpec& l : p.model().layers) profiled.insert(l.prototype->name());
  const auto stand_in = [&](const std::string& name) {
    return profiled_stand_in(name, [&](const std::string& n) { return profiled.count(n) > 0; });
  };
  CHECK(stand_in("wte") == "wte");
  CHECK(stand_in("h.0.attn") == "h.0.attn");
  CHECK(stand_in("h.1.fc") == "h.1.fc");
  CHECK(stand_in("h.15.fc") == "h.1.fc");
  CHECK(stand_in("h.9.gelu_1") == "h.1.gelu_1");
  CHECK(stand_in("head") == "head");
  CHECK(stand_in("nothing") == "");
  // The Shakespeare GPT's 4 blocks are cut to 2 as well.
  CHECK(profile_recipe(shakespeare(), 4, true, 2).train.matmul_dtype == DType::bf16);
  CHECK(profile_recipe(shakespeare(), 4, false, 2).model().layers.size() == shakespeare().model().layers.size() - 2 * 8);
  CHECK(profile_recipe(shakespeare(), 4, false, 2, 0).model().layers.size() == shakespeare().model().layers.size());  // none cut
}

TEST_CASE("plan: --links parses rates and units, and refuses what it cannot read") {
  const Links l = parse_links("intra=2GB/s,inter=100Mbit/s");
  CHECK(l.intra_bytes_per_s == doctest::Approx(2e9));
  CHECK(l.inter_bytes_per_s == doctest::Approx(12.5e6));
  CHECK(parse_links("inter=10Gbit/s").intra_bytes_per_s == doctest::Approx(Links{}.intra_bytes_per_s));
  CHECK_THROWS_WITH_AS(parse_links("inter=10 furlongs/s"), doctest::Contains("--links inter=10 furlongs/s"), UserError);
  CHECK_THROWS_WITH_AS(parse_links("inter=10Gbps"), doctest::Contains("expected intra=RATE/s,inter=RATE/s"), UserError);
  CHECK_THROWS_AS(parse_links("inter=0GB/s"), UserError);
}

TEST_CASE("plan --device-tflops: each layer's operations counted, its time the longer of them and its bytes") {
  // The Llama recipe (64 tokens, width 128, 4 query heads over 2 key/value heads, SwiGLU of
  // 384, vocabulary 65): each product's multiply-adds, twice.
  const Recipe llama = load_recipe(std::string(DISTRAIN_SOURCE_DIR) + "/recipes/llama_shakespeare.toml",
                                   {"data.path=\"" + std::string(DISTRAIN_SOURCE_DIR) + "/data/tiny_shakespeare.txt\""});
  const Model model(llama.model(), backend_for(Device{}), storage_free_seams());
  const auto flops = [&](const std::string& name) {
    for (const auto& l : model.layers())
      if (l->name() == name) return l->forward_flops();
    FAIL("no layer " << name);
    return 0.0;
  };
  const double t = 64, c = 128, kv = 2 * 2 * 32, units = 384, vocabulary = 65;
  CHECK(flops("layers.0.self_attn") == doctest::Approx(2 * t * c * (c + kv) + 2 * t * c * c + 4 * (t * (t + 1) / 2) * c));
  CHECK(flops("layers.0.mlp") == doctest::Approx(6 * t * c * units));
  CHECK(flops("lm_head") == doctest::Approx(2 * t * c * vocabulary));
  CHECK(flops("embed_tokens") == 0);
  CHECK(flops("layers.0.input_layernorm") == 0);

  const DeviceRate rate = parse_device_rate(10, "100TB/s");
  CHECK(rate.flops_per_s == doctest::Approx(1e13));
  CHECK(rate.bytes_per_s == doctest::Approx(1e14));
  const LayerTimes times = rated_layer_times(llama, 4, false, rate, 1000);
  // The head's products outweigh its bytes at this rate; the norm moves bytes only.
  CHECK(times.layer_ms.at("lm_head").first == doctest::Approx(4 * 2 * t * c * vocabulary / 1e13 * 1e3));
  CHECK(times.layer_ms.at("lm_head").second == doctest::Approx(2 * times.layer_ms.at("lm_head").first));
  CHECK(times.layer_ms.at("layers.0.input_layernorm").first == doctest::Approx((2 * 4 * t * c * 4 + c * 4) / 1e14 * 1e3));
  CHECK(rated_layer_times(llama, 4, true, rate, 1000).layer_ms.at("layers.0.input_layernorm").first ==
        doctest::Approx((2 * 4 * t * c * 4 + c * 2) / 1e14 * 1e3));  // bf16: its weights read as 2 bytes
  // The embedding reads at most the rows it gathers: here the whole table of 65 rows is fewer.
  CHECK(times.layer_ms.at("embed_tokens").first == doctest::Approx((2 * 4 * t * c * 4 + vocabulary * c * 4) / 1e14 * 1e3));
  CHECK(times.layer_ms.size() == model.layers().size());
  CHECK(times.value_bytes == 1000);
  // The update moves the whole model's float32 weights (read and written), gradients and
  // AdamW's two slots (read and written), whatever the recipe's layout: estimate_step takes
  // a rank's share of it.
  const double values = 804224.0 * 4;
  CHECK(times.update_ms == doctest::Approx((3 * values + 2 * 2 * values) / 1e14 * 1e3));
  CHECK(rated_layer_times(layout_recipe(llama, PlanLayout{1, 2, 1, 1}, 12), 4, false, rate, 1000).update_ms ==
        doctest::Approx(times.update_ms));

  CHECK_THROWS_WITH_AS(parse_device_rate(100, ""), doctest::Contains("--device-bandwidth"), UserError);
  CHECK_THROWS_WITH_AS(parse_device_rate(100, "3 furlongs"), doctest::Contains("--device-bandwidth 3 furlongs"), UserError);
  CHECK_THROWS_AS(parse_device_rate(0, "1TB/s"), UserError);
  CHECK_THROWS_AS(parse_device_rate(100, "0.1GB/s"), UserError);
}

TEST_CASE("plan: a pipeline's step simulated op by op: the bubble, shared cores, messages") {
  const auto stage = [](int host, int ranks = 1, double message_s = 0) {
    return PipeStage{1.0, 2.0, 0, 0, message_s, {{host, ranks}}};
  };
  // Four equal stages on hosts of their own: (M + P - 1) slots under either schedule.
  const std::vector<PipeStage> apart{stage(0), stage(1), stage(2), stage(3)};
  for (PipeSchedule schedule : {PipeSchedule::gpipe, PipeSchedule::one_f_one_b}) {
    CHECK(simulate_pipeline(apart, schedule, 4, {1, 1, 1, 1}) == doctest::Approx(7 * 3.0));
    CHECK(simulate_pipeline(apart, schedule, 1, {1, 1, 1, 1}) == doctest::Approx(4 * 3.0));
  }
  // All four on one core: it never idles, so the step is the whole work, 4 stages x 4
  // micro-batches x 3; on two cores each pair of stages at work shares one.
  const std::vector<PipeStage> together{stage(0), stage(0), stage(0), stage(0)};
  CHECK(simulate_pipeline(together, PipeSchedule::one_f_one_b, 4, {1}) == doctest::Approx(48.0));
  CHECK(simulate_pipeline(together, PipeSchedule::one_f_one_b, 4, {4}) == doctest::Approx(7 * 3.0));
  // Two stages a host, a core each: between apart (21) and together (48). 1F1B on the
  // profile of bench/plan_gpt_wide.toml's 4 stages (23.5 ms forward, 47.1 ms backward)
  // takes 753.1 ms, as an independent event simulation in Python gave.
  const std::vector<PipeStage> paired{stage(0), stage(0), stage(1), stage(1)};
  const double two_hosts = simulate_pipeline(paired, PipeSchedule::one_f_one_b, 4, {1, 1});
  CHECK(two_hosts > 21.0);
  CHECK(two_hosts < 48.0);
  std::vector<PipeStage> gpt = paired;
  for (PipeStage& s : gpt) s.forward_s = 23.5, s.backward_s = 47.1;
  CHECK(simulate_pipeline(gpt, PipeSchedule::one_f_one_b, 4, {1, 1}) == doctest::Approx(753.1));
  // A stage of two tensor ranks on one core takes twice as long; its collectives' waits
  // add without taking a core.
  std::vector<PipeStage> tensor{PipeStage{1.0, 2.0, 0.5, 0.5, 0, {{0, 2}}}};
  CHECK(simulate_pipeline(tensor, PipeSchedule::one_f_one_b, 3, {1}) == doctest::Approx(3 * (2 * 3.0 + 1.0)));
  // Messages of 10 s with no work: one link direction carries one at a time, and the last
  // gradient comes back after M + 1 of them.
  const std::vector<PipeStage> slow{PipeStage{0, 0, 0, 0, 10.0, {{0, 1}}}, PipeStage{0, 0, 0, 0, 10.0, {{1, 1}}}};
  CHECK(simulate_pipeline(slow, PipeSchedule::one_f_one_b, 3, {1, 1}) == doctest::Approx(40.0));
}

TEST_CASE("plan: step times follow the layout: split layers, bubbles, links") {
  const Recipe base = shakespeare();
  const LayerTimes times = flat_times(base);
  const Cluster one_host{2, 1}, two_hosts{2, 2};
  const Links links = parse_links("intra=10GB/s,inter=100Mbit/s");
  const auto estimate = [&](const PlanLayout& l, const Cluster& c, const Links& over = Links{}) {
    const Recipe r = layout_recipe(base, l, 12);
    int64_t values = 0;
    for (const RankBytes& b : mesh_rank_bytes(r)) values = std::max(values, b.values);
    const Links& used = over.inter_bytes_per_s == Links{}.inter_bytes_per_s ? links : over;
    return estimate_step(r, l, c, used, times, values, CoreSharing{});
  };
  const size_t layers = base.model().layers.size();
  // data 2: every layer whole, 3 ms each; the gradients all-reduced over the link.
  const StepEstimate d2 = estimate(PlanLayout{2}, one_host);
  CHECK(d2.compute_ms == doctest::Approx(3.0 * static_cast<double>(layers)));
  CHECK(d2.tensor_ms == 0);
  CHECK(estimate(PlanLayout{2}, two_hosts).data_ms > 100 * d2.data_ms);  // 100 Mbit/s against 10 GB/s
  // tensor 2: split layers take half; the whole ones (norms, adds, embeddings, head) all.
  const StepEstimate t2 = estimate(PlanLayout{1, 2}, one_host);
  CHECK(t2.compute_ms < d2.compute_ms);
  CHECK(t2.compute_ms > d2.compute_ms / 2);
  CHECK(t2.tensor_ms > 0);
  CHECK(t2.data_ms == 0);
  // pipeline 2 of 4 micro-batches (the schedule simulated: plan_pipeline.hpp): the slowest
  // stage 4 times, and the other stage's slot once, when messages cost nothing (10 GB/s).
  // Over 100 Mbit/s a message (3 x 64 x 128 floats) takes 7.9 ms: it hides behind a stage's
  // work (about 18 layers of 3 ms), but 1F1B keeps the first stage one micro-batch ahead,
  // so the second waits for activations sent after a gradient came back: 4 messages more.
  // Over 10 Mbit/s (78.6 ms) messages set the pace.
  const Links fast = parse_links("intra=10GB/s,inter=10GB/s");
  const StepEstimate p2_fast = estimate(PlanLayout{1, 1, 2, 4}, two_hosts, fast);
  CHECK(p2_fast.bubble_ms <= p2_fast.compute_ms / 4 + 0.5);  // + the messages' 50 us latencies
  CHECK(p2_fast.bubble_ms > 0.8 * p2_fast.compute_ms / 4);
  const StepEstimate p2 = estimate(PlanLayout{1, 1, 2, 4}, two_hosts);
  CHECK(p2.pipe_ms == 0);
  const double message_ms = 3 * 64 * 128 * 4 / 12.5e6 * 1e3 + 50e-3;
  CHECK(p2.total_ms() - p2_fast.total_ms() == doctest::Approx(4 * message_ms).epsilon(0.01));
  const StepEstimate slow = estimate(PlanLayout{1, 1, 2, 4}, two_hosts, parse_links("inter=10Mbit/s"));
  const double slow_message_ms = 3 * 64 * 128 * 4 / 1.25e6 * 1e3 + 50e-3;
  CHECK(slow.compute_ms + slow.pipe_ms == doctest::Approx(4 * slow_message_ms));
  CHECK(slow.total_ms() > 5 * slow_message_ms);  // the last gradient back after M + 1 messages
  // On 2 hosts of 2 ranks, stage-major: pipeline 4 crosses the hosts' link with one pair of
  // ranks (1 -> 2), data 2 x pipeline 2 with two (0 -> 2 and 1 -> 3), which share it; as
  // does a measured message rate, a host link's.
  const Links slow_links = parse_links("inter=10Mbit/s");
  const auto paced_ms = [&](const PlanLayout& l, const Links& over) {
    const StepEstimate e = estimate(l, Cluster{4, 2}, over);
    return (e.compute_ms + e.pipe_ms) / l.micro_batches;  // a micro-batch's message, where messages set the pace
  };
  CHECK(paced_ms(PlanLayout{1, 1, 4, 4}, slow_links) == doctest::Approx(slow_message_ms));
  CHECK(paced_ms(PlanLayout{2, 1, 2, 2}, slow_links) == doctest::Approx(2 * slow_message_ms - 50e-3));
  Links message_rate = slow_links;
  message_rate.inter_message_bytes_per_s = 2.5e6;  // twice the link's all-reduce rate
  CHECK(paced_ms(PlanLayout{1, 1, 4, 4}, message_rate) == doctest::Approx(slow_message_ms / 2 + 25e-3));
  CHECK(paced_ms(PlanLayout{2, 1, 2, 2}, message_rate) == doctest::Approx(slow_message_ms));
  // Four stages on one host of two cores (each rank computing at half speed while all four
  // work): with one micro-batch only one rank works at a time, at full speed, so the step
  // is every layer once at full speed (3 ms); with four, the cores are rarely idle.
  const auto shared = [&](const PlanLayout& l, const Cluster& cluster = Cluster{4, 1}, CoreSharing cores = {2.0}) {
    const Recipe r = layout_recipe(base, l, 12);
    return estimate_step(r, l, cluster, fast, times, mesh_rank_bytes(r).at(0).values, cores);
  };
  const double every_layer_ms = 3.0 * static_cast<double>(layers);
  const StepEstimate p4 = shared(PlanLayout{1, 1, 4, 1});
  CHECK(p4.compute_ms + p4.bubble_ms == doctest::Approx(every_layer_ms).epsilon(0.01));
  const StepEstimate p4_m4 = shared(PlanLayout{1, 1, 4, 4});
  CHECK(p4_m4.bubble_ms < p4_m4.compute_ms / 10);
  CHECK(p4_m4.total_ms() >= 4 * every_layer_ms / 2);  // 4 micro-batches' work on 2 cores
  // Measured 2.5x slower with every rank at work than alone (plan --measure): the profile
  // scaled by that, and the lone rank at half of it.
  const StepEstimate together = shared(PlanLayout{1, 1, 4, 1}, Cluster{4, 1}, CoreSharing{2.0, 2.5});
  CHECK(together.compute_ms == doctest::Approx(p4.compute_ms * 1.25));
  CHECK(together.compute_ms + together.bubble_ms == doctest::Approx(1.25 * every_layer_ms).epsilon(0.01));
  // Two stages on two hosts of one core each, two tensor ranks a stage: each host holds
  // one stage, whose core idles in the bubble: the other stage's slot, as on unshared cores.
  const StepEstimate apart = shared(PlanLayout{1, 2, 2, 4}, Cluster{4, 2});
  CHECK(apart.bubble_ms <= (apart.compute_ms + apart.tensor_ms) / 4 + 0.5);
  CHECK(apart.bubble_ms > 0.8 * (apart.compute_ms + apart.tensor_ms) / 4);
  // Four stages on two such hosts, two a host: the hosts' cores idle by turns while
  // micro-batches pass: longer than a pipeline of 2 hosts that each run half the layers
  // at full speed (M + 1 = 5 of their slots), shorter than one more slot.
  const StepEstimate p4_two_hosts = shared(PlanLayout{1, 1, 4, 4}, Cluster{4, 2});
  CHECK(p4_two_hosts.total_ms() > 5 * every_layer_ms / 2);
  CHECK(p4_two_hosts.total_ms() < 6 * every_layer_ms / 2);
  // recompute: each block layer's forward again.
  CHECK(estimate(PlanLayout{2, 1, 1, 1, false, false, true}, one_host).compute_ms > d2.compute_ms);
  // ZeRO-1: the update on half the weights.
  CHECK(estimate(PlanLayout{2, 1, 1, 1, true}, one_host).update_ms == doctest::Approx(d2.update_ms / 2));
  // ZeRO-2 sends an all-reduce's bytes (a reduce-scatter and an all-gather per layer),
  // ZeRO-3 half as much again (the weights gathered for the forward and the backward);
  // both update half the weights.
  const StepEstimate z2 = estimate(PlanLayout{2, 1, 1, 1, false, false, false, false, 2}, two_hosts);
  const StepEstimate z3 = estimate(PlanLayout{2, 1, 1, 1, false, false, false, false, 3}, two_hosts);
  const StepEstimate d2_slow = estimate(PlanLayout{2}, two_hosts);
  CHECK(z2.data_ms == doctest::Approx(d2_slow.data_ms).epsilon(0.02));
  CHECK(z2.data_ms > d2_slow.data_ms);  // a latency per layer, not one
  CHECK(z3.data_ms == doctest::Approx(1.5 * z2.data_ms));
  CHECK(z3.update_ms == doctest::Approx(d2.update_ms / 2));
  CHECK(z3.compute_ms == doctest::Approx(d2.compute_ms));
  // Accumulating 2 micro-batches: every layer runs twice (flat times: twice the compute);
  // the mesh all-reduces once, ZeRO-2 reduce-scatters at each micro-batch (3 halves, not
  // 2) and ZeRO-3 gathers and scatters at each (6, not 3).
  const StepEstimate a2 = estimate(PlanLayout{2, 1, 1, 2}, one_host);
  CHECK(a2.compute_ms == doctest::Approx(2 * d2.compute_ms));
  CHECK(a2.data_ms == doctest::Approx(d2.data_ms));
  CHECK(estimate(PlanLayout{2, 1, 1, 2, false, false, false, false, 2}, two_hosts).data_ms == doctest::Approx(1.5 * z2.data_ms));
  CHECK(estimate(PlanLayout{2, 1, 1, 2, false, false, false, false, 3}, two_hosts).data_ms == doctest::Approx(2 * z3.data_ms));
  // A ring is as fast as its slowest hop: on 2 hosts of 2 ranks whose host-local link is
  // the slower (TCP through loopback on shared cores, as --measure found), data 4 passes
  // both links and goes at the local one's rate; data 2 x tensor 2 crosses hosts only
  // (its two data groups sharing the host's link).
  const Cluster two_by_two{4, 2};
  const Links local_slower = parse_links("intra=0.5GB/s,inter=1GB/s");
  const auto largest_values = [&](const PlanLayout& l) {
    int64_t values = 0;
    for (const RankBytes& b : mesh_rank_bytes(layout_recipe(base, l, 12))) values = std::max(values, b.values);
    return static_cast<double>(values);
  };
  CHECK(estimate(PlanLayout{4}, two_by_two, local_slower).data_ms ==
        doctest::Approx(2.0 * 3 * (5e-6 + largest_values(PlanLayout{4}) / 4 / 0.5e9) * 1e3));
  CHECK(estimate(PlanLayout{2, 2}, two_by_two, local_slower).data_ms ==
        doctest::Approx(2.0 * (50e-6 + largest_values(PlanLayout{2, 2}) / 2 / (1e9 / 2)) * 1e3));
  // Where --measure timed a ring of the whole job, data 4 goes at its rate and latency,
  // ZeRO's collectives at its reduce-scatter and all-gather rates; data 2 x tensor 2 does not
  // pass both links.
  Links measured = local_slower;
  measured.both_bytes_per_s = 0.2e9;
  measured.both_shard = {0.25e9, 0.25e9};
  measured.both_latency_s = 100e-6;
  CHECK(estimate(PlanLayout{4}, two_by_two, measured).data_ms ==
        doctest::Approx(2.0 * 3 * (100e-6 + largest_values(PlanLayout{4}) / 4 / 0.2e9) * 1e3));
  const PlanLayout zero1{4, 1, 1, 1, true};
  Links faster_shards = measured;
  faster_shards.both_shard = {0.5e9, 0.5e9};  // a reduce-scatter and an all-gather, (n - 1) / n of the bytes each
  CHECK(estimate(zero1, two_by_two, measured).data_ms - estimate(zero1, two_by_two, faster_shards).data_ms ==
        doctest::Approx(3.0 * 2 * largest_values(zero1) / 4 * (1 / 0.25e9 - 1 / 0.5e9) * 1e3));
  // Each kind at its own rate: ZeRO-1 gathers the weights once a step, ZeRO-3 before the
  // forward and again before the backward.
  Links faster_gathers = measured;
  faster_gathers.both_shard.gather_bytes_per_s = 0.5e9;
  const PlanLayout zero3{4, 1, 1, 1, false, false, false, false, 3};
  for (const auto& [layout, gathers] : {std::pair{zero1, 1.0}, std::pair{zero3, 2.0}})
    CHECK(estimate(layout, two_by_two, measured).data_ms - estimate(layout, two_by_two, faster_gathers).data_ms ==
          doctest::Approx(3.0 * gathers * largest_values(layout) / 4 * (1 / 0.25e9 - 1 / 0.5e9) * 1e3));
  CHECK(estimate(PlanLayout{2, 2}, two_by_two, measured).data_ms ==
        doctest::Approx(estimate(PlanLayout{2, 2}, two_by_two, local_slower).data_ms));
}

TEST_CASE("plan --measure's calibration: the slowdown at which a step takes what it measured, then the data axis's wait") {
  const Recipe base = shakespeare();
  LayerTimes times = flat_times(base);
  times.step_ms = 4.0;
  const Cluster two_by_two{4, 2};
  const Links links = parse_links("intra=1GB/s,inter=100Mbit/s");
  const auto step = [&](const PlanLayout& layout, CoreSharing cores, const Cluster& cluster = Cluster{4, 2}) {
    return estimate_step(layout_recipe(base, layout, 12), layout, cluster, links, times, times.value_bytes, cores);
  };
  for (const PlanLayout& layout : {PlanLayout{4}, PlanLayout{4, 1, 1, 2}, PlanLayout{4, 1, 1, 1, true},
                                   PlanLayout{1, 1, 4, 4}, PlanLayout{2, 1, 2, 2}}) {
    CAPTURE(layout.str());
    const Recipe r = layout_recipe(base, layout, 12);
    // A step measured as the model prices it at 2.7x gives 2.7x back (a pipeline's by
    // halving); one faster than the links alone allow leaves the profile as it ran (1x).
    const auto at = [&](double slowdown) { return step(layout, CoreSharing{2.0, slowdown}).total_ms(); };
    const auto fitted = [&](double measured_ms) {
      return slowdown_for_step(r, layout, two_by_two, links, times, CoreSharing{2.0}, &CoreSharing::measured_slowdown,
                               measured_ms);
    };
    CHECK(fitted(at(2.7)) == doctest::Approx(2.7).epsilon(1e-6));
    CHECK(fitted(at(1.6)) == doctest::Approx(1.6).epsilon(1e-6));
    CHECK(fitted(at(1.0) / 2) == 1.0);
  }
  // Tensor layouts take a slowdown of their own where one is measured, fitted with the
  // other figures held (the data axis's wait priced, as data 2 x tensor 2 crosses hosts);
  // the others keep theirs.
  const PlanLayout tensor_2{2, 2, 1, 2};
  const CoreSharing held{2.0, 2.7, 0.08};
  const auto tensor_at = [&](double slowdown) {
    CoreSharing cores = held;
    cores.tensor_slowdown = slowdown;
    return step(tensor_2, cores).total_ms();
  };
  CHECK(slowdown_for_step(layout_recipe(base, tensor_2, 12), tensor_2, two_by_two, links, times, held,
                          &CoreSharing::tensor_slowdown, tensor_at(2.2)) == doctest::Approx(2.2).epsilon(1e-6));
  CHECK(tensor_at(2.2) < step(tensor_2, held).total_ms());
  CHECK(tensor_at(0) == step(tensor_2, held).total_ms());  // 0: not measured
  CHECK(tensor_at(2.7) == doctest::Approx(step(tensor_2, held).total_ms()));
  CoreSharing with_tensor = held;
  with_tensor.tensor_slowdown = 2.2;
  for (const PlanLayout& other : {PlanLayout{4}, PlanLayout{1, 1, 4, 4}, PlanLayout{2, 1, 2, 2}})
    CHECK(step(other, with_tensor).total_ms() == step(other, held).total_ms());
  CHECK(step(PlanLayout{1, 2, 2, 4}, with_tensor).compute_ms ==
        doctest::Approx(step(PlanLayout{1, 2, 2, 4}, held).compute_ms * 2.2 / 2.7));
  // The wait: what data 4's step took beyond its price at the pipeline's slowdown, and none
  // when it took less.
  const PlanLayout data_4{4};
  const Recipe r = layout_recipe(base, data_4, 12);
  const CoreSharing paced{2.0, 2.7};
  CHECK(data_wait_for_step(r, data_4, two_by_two, links, times, paced, step(data_4, {2.0, 2.7, 0.08}).total_ms()) ==
        doctest::Approx(0.08));
  CHECK(data_wait_for_step(r, data_4, two_by_two, links, times, paced, step(data_4, paced).total_ms() - 10) == 0.0);
  // It is priced, as that share of a step's compute, where a data group crosses hosts as
  // data 4 does (or on one host, where data 4 does not): not for data 2 inside a host
  // beside a pipeline across them.
  const auto wait_share = [&](const PlanLayout& layout, const Cluster& cluster) {
    const StepEstimate paced_step = step(layout, paced, cluster);
    return (step(layout, {2.0, 2.7, 0.08}, cluster).data_ms - paced_step.data_ms) / paced_step.compute_ms;
  };
  CHECK(wait_share(PlanLayout{2, 2}, two_by_two) == doctest::Approx(0.08));
  CHECK(wait_share(PlanLayout{4, 1, 1, 1, false, false, false, false, 3}, two_by_two) == doctest::Approx(0.08));
  CHECK(wait_share(PlanLayout{2, 1, 2, 2}, two_by_two) == 0.0);
  CHECK(wait_share(PlanLayout{2, 1, 2, 2}, Cluster{4, 1}) == doctest::Approx(0.08));
  CHECK(wait_share(PlanLayout{1, 1, 4, 4}, Cluster{4, 1}) == 0.0);
}

TEST_CASE("plan: ZeRO-2 and -3 are data-only layouts, zero recipes weighed without building them") {
  const Recipe base = shakespeare();
  std::set<std::string> zero;
  for (const PlanLayout& l : enumerate_layouts(Cluster{4, 2}, 12, 4, 40, {false, true}))
    if (l.zero_stage > 0) {
      CHECK(l.data == 4);
      CHECK(l.tensor * l.pipeline == 1);
      CHECK_FALSE(l.shard_optimizer);
      zero.insert(l.str());
    }
  CHECK(zero.size() == 16);  // stages 2, 3 x recompute x offload x precision
  CHECK(zero.count("data 4, ZeRO-3, recompute, offload, bf16"));
  const PlanLayout l{2, 1, 1, 1, false, false, true, true, 3, true};
  const Recipe r = layout_recipe(base, l, 12);
  CHECK(r.strategy.name == "zero");
  CHECK(r.strategy.zero.stage == 3);
  CHECK(r.strategy.per_replica_batch == 6);
  CHECK(r.strategy.zero.offload_optimizer);
  CHECK(r.train.recompute_blocks);
  CHECK(r.train.matmul_dtype == DType::bf16);
  const Recipe again = load_recipe(std::string(DISTRAIN_SOURCE_DIR) + "/recipes/shakespeare_char_gpt.toml", [&] {
    std::vector<std::string> sets = layout_overrides(l, 12);
    sets.push_back("data.path=\"" + std::string(DISTRAIN_SOURCE_DIR) + "/data/tiny_shakespeare.txt\"");
    return sets;
  }());
  CHECK(again.resolved_text() == r.resolved_text());
}

TEST_CASE("plan: gradient accumulation is a layout: the mesh's micro_batches, zero's train.accumulate_steps") {
  const Recipe base = shakespeare();
  std::set<std::string> names;
  for (const PlanLayout& l : enumerate_layouts(Cluster{2, 1}, 12, 4, 40)) names.insert(l.str());
  CHECK(names.count("data 2, accumulate 2"));
  CHECK(names.count("data 2, ZeRO-3, accumulate 2"));
  CHECK_FALSE(names.count("data 2, accumulate 4"));  // 4 does not divide a rank's 6
  const PlanLayout mesh{2, 1, 1, 2};
  const Recipe m = layout_recipe(base, mesh, 12);
  CHECK(m.strategy.name == "mesh");
  CHECK(m.strategy.mesh.micro_batches == 2);
  CHECK(m.step_batch() == 6);
  CHECK(mesh_rank_bytes(m).at(0).activations < mesh_rank_bytes(layout_recipe(base, PlanLayout{2}, 12)).at(0).activations);
  const PlanLayout zero{2, 1, 1, 2, false, false, false, false, 3};
  const Recipe z = layout_recipe(base, zero, 12);
  CHECK(z.strategy.per_replica_batch == 3);  // one micro-batch
  CHECK(z.train.accumulate_steps == 2);
  CHECK(z.step_batch() == 6);
  PlanLayout whole = zero;
  whole.micro_batches = 1;
  CHECK(zero_memory_per_replica(z, 2).activations < zero_memory_per_replica(layout_recipe(base, whole, 12), 2).activations);
  const Recipe again = load_recipe(std::string(DISTRAIN_SOURCE_DIR) + "/recipes/shakespeare_char_gpt.toml", [&] {
    std::vector<std::string> sets = layout_overrides(zero, 12);
    sets.push_back("data.path=\"" + std::string(DISTRAIN_SOURCE_DIR) + "/data/tiny_shakespeare.txt\"");
    return sets;
  }());
  CHECK(again.resolved_text() == z.resolved_text());
}
