// What the workers and servers of parameter_server say to each other (world communicator),
// and which range of the trainable arena each server holds. Control values travel as
// float64 (exact for any step count), parameters and gradients as float32.
//   worker -> server           server -> worker
//   kPull     [clock]          kValues [range]          when the staleness bound allows
//   kPush     [lr, grads of range]
//   kSnapshot [clock]          kGot    [range] (values) once every worker has pushed `clock`
//                                      steps; the server keeps that state (values, slots,
//                                      iterations) for the kGets that follow
//   kGet      [what]           kGot    [range] (a slot of the snapshot) or [its iterations]
//   kDone     [0]              (the worker trains no more)
#pragma once
#include <cstdint>

#include "core/base/range.hpp"
#include "core/tensor/param_arena.hpp"
#include "core/tensor/tensor.hpp"

namespace distrain {

enum PsTag : int { kPull = 101, kValues, kPush, kDone, kGet, kGot, kSnapshot };
constexpr double kGetIterations = -2;  // a kGet payload besides a slot index

// Server k's range of the trainable arena: [begin(k), begin(k + 1)), 16-float aligned.
struct PsRanges {
  int64_t arena = 0;
  int servers = 1;
  int64_t begin(int k) const {
    return k >= servers ? arena : arena * k / servers / ParamArena::kAlign * ParamArena::kAlign;
  }
  int64_t length(int k) const { return begin(k + 1) - begin(k); }
  Range range(int k) const { return {begin(k), begin(k + 1)}; }
};

// The elements of a variable in the trainable arena.
inline Range range_of(const Variable& v) { return {v.offset, v.offset + v.shape.numel()}; }

}  // namespace distrain
