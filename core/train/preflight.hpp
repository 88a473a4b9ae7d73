// Checks made before any work that the work itself would find only later, after
// allocating or training for hours: sizes that overflow, a batch the machine's memory
// cannot hold, a run folder that cannot be written. Each throws UserError naming the key
// or path and what to do. `distrain check` runs the ones that write nothing.
#pragma once
#include <optional>
#include <string>

#include "core/io/recipe.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

// The model's input shape must be the data's example shape, and its outputs at least the
// data's classes. Builds the model's shapes alone (on the CPU, its variables not
// allocated), so that it runs before make_strategy starts communicators and allocates.
void check_data_fits(const Recipe& recipe, const Dataset& train);

// Under sync_batch_norm every replica takes part in the statistics of every step: the
// last partial batch of an epoch must give each replica (planned_replicas) an example.
void check_last_batch(const Recipe& recipe, const Dataset& train);

// What this process's replicas hold in host memory, `m` being one replica's: the buffers
// of CPU replicas (their device is host memory) and every replica's offloaded state.
int64_t host_bytes_of_replicas(const Recipe& recipe, const MemoryUse& m);

// The global batch and the planned bytes of this process's replicas (parameters,
// gradients, optimizer slots, activations: MemoryUse) must be countable in 64 bits and fit
// the machine's available memory (host_bytes_of_replicas). Names
// strategy.per_replica_batch or train.eval_batch, with the sizes. `available`: the host's
// available memory (available_host_memory()) taken before the strategy was built, whose
// replicas' buffers it already holds.
void check_memory_fits(const Recipe& recipe, Strategy& strategy, std::optional<int64_t> available);

// A strategy that builds every replica of this process before check_memory_fits can count
// them (zero) would end that build in the kernel's OOM killer on a model too large for the
// host. From the recipe alone (StrategyKind::memory_before_build, byte for byte the built
// strategy's figures): a replica's figures where the host cannot hold them (nullopt where
// it can, and for strategies that predict none), and a UserError with the sizes.
std::optional<MemoryUse> replicas_over_host(const Recipe& recipe);
void check_replicas_fit_host(const Recipe& recipe);

// train.epochs x the batches of an epoch is the planned step count: it must fit 64 bits.
void check_planned_steps(const Recipe& recipe, int64_t batches_per_epoch);

// Creates the run folder when missing and proves it writable by creating and removing a
// probe file, so a read-only folder, a path that is a file, or a full disk stops the
// run before training instead of at the first save. Only the writer (worker 0) probes.
void prepare_run_folder(const std::string& run_dir, bool writer);

}  // namespace distrain
