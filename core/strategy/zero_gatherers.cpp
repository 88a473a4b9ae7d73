#include "core/strategy/zero_gatherers.hpp"

#include "core/backend/backend.hpp"
#include "core/strategy/zero_reducers.hpp"

namespace distrain {

namespace {

// Layer l's chunks from every replica's shard, n x C_l elements at the start of `into`:
// the layer's range of the arena, laid out from its first element.
Tensor gather_layer(Communicator& all, const ShardLayout& layout, size_t l, const Tensor& shard, Tensor into) {
  const int64_t chunk = layout.chunk(l);
  const Tensor gathered = into.range(0, chunk * layout.replicas());
  all.all_gather(shard.range(layout.offset(l), chunk), gathered);
  return gathered;
}

// The same in bf16: this replica's chunk rounded into `staging` first.
Tensor gather_layer_bf16(Backend& device, Communicator& all, const ShardLayout& layout, size_t l, const Tensor& shard,
                         Tensor staging, Tensor into) {
  const int64_t chunk = layout.chunk(l);
  const Tensor mine = staging.range(0, chunk);
  device.rounded_bf16(shard.range(layout.offset(l), chunk), mine);
  const Tensor gathered = into.range(0, chunk * layout.replicas());
  all.all_gather(mine, gathered);
  return gathered;
}

int64_t largest_chunk(const ShardLayout& layout) { return layout.bucket_size() / std::max(1, layout.replicas()); }

// The masters' place: host memory under bf16 with offload_optimizer, else the device's.
Buffer master_shard(Backend& device, const ShardLayout& layout, const ShardedValues& how) {
  Backend& place = how.bf16 && how.master_on_host ? host_backend() : device;
  Buffer shard(place, Shape{layout.size()});
  if (!shard.empty()) place.fill(shard.view(), 0.0f);
  return shard;
}

int64_t bytes_of(std::initializer_list<const Buffer*> buffers) {
  int64_t bytes = 0;
  for (const Buffer* b : buffers)
    if (!b->empty()) bytes += static_cast<int64_t>(b->view().bytes());
  return bytes;
}

}  // namespace

int64_t unpacked_size(const std::vector<Range>& layers) {
  int64_t largest = 0;
  for (const Range& r : layers) largest = std::max(largest, r.size());
  return largest;
}

int64_t host_bytes_of(const Buffer& b) {
  return !b.empty() && b.view().device == Device::host() ? static_cast<int64_t>(b.view().bytes()) : 0;
}

void GatherUpdates::attach(ParamArena& arena, const std::vector<Range>& layers) {
  backend_ = &arena.backend();
  arena_ = &arena;
  layers_ = layers;
  layout_ = ShardLayout(layers, all_.size());
  shard_ = master_shard(*backend_, layout_, how_);
  const int64_t size = arena.trainable_arena_size(), room = size + ParamArena::kAlign * all_.size();
  if (how_.bf16) {
    packed_ = Buffer(*backend_, Shape{room}, DType::bf16);
    staging_ = Buffer(*backend_, Shape{largest_chunk(layout_)}, DType::bf16);
    unpacked_ = Buffer(*backend_, Shape{unpacked_size(layers)});
    arena.bind_values(0, Tensor{});
    stale_ = true;
    return;
  }
  values_ = Buffer(*backend_, Shape{room});
  if (!values_.empty()) backend_->fill(values_.view(), 0.0f);
  arena.bind_values(0, values_.view().range(0, size));
}

int64_t GatherUpdates::bytes() const {
  return bytes_of({&values_, &packed_, &staging_, &unpacked_, &shard_}) - host_bytes();
}

// bf16: the layer's values unpacked while it runs.
void GatherUpdates::gather(size_t layer) {
  if (!how_.bf16) return;
  const Tensor values = unpacked(layer);
  if (!values.empty()) arena_->bind_values(layers_.at(layer).begin, values);
}

Tensor GatherUpdates::unpacked(size_t layer) {
  if (stale_) share_packed();
  const Range r = layers_.at(layer);
  if (r.empty()) return Tensor{};
  const Tensor values = unpacked_.view().range(0, r.size());
  backend_->from_bf16(packed_.view().range(r.begin, r.size()), values);
  return values;
}

namespace {

// A pipeline copy of a model whose values a GatherUpdates holds in bf16: each layer's,
// unpacked by that gatherer, bound in the copy's arena while it runs. The copy updates
// nothing and holds nothing of its own.
class UnpackedCopy final : public ParamGatherer {
 public:
  explicit UnpackedCopy(GatherUpdates& first) : first_(first) {}
  void attach(ParamArena& arena, const std::vector<Range>& layers) override {
    arena_ = &arena;
    layers_ = layers;
    arena.bind_values(0, Tensor{});
  }
  void gather(size_t layer) override {
    const Tensor values = first_.unpacked(layer);
    if (!values.empty()) arena_->bind_values(layers_.at(layer).begin, values);
  }
  void release(size_t) override { arena_->bind_values(0, Tensor{}); }
  void before_update() override {}
  void after_update() override {}
  Tensor own() const override { return first_.own(); }
  int64_t bytes() const override { return 0; }
  bool collective() const override { return true; }  // a step's first gather may share
  Binding binding() const override { return Binding::rounded_copy; }

 private:
  GatherUpdates& first_;
  ParamArena* arena_ = nullptr;
  std::vector<Range> layers_;
};

}  // namespace

std::unique_ptr<ParamGatherer> GatherUpdates::for_copy() {
  return how_.bf16 ? std::make_unique<UnpackedCopy>(*this) : nullptr;
}

void GatherUpdates::release(size_t) {
  if (how_.bf16) arena_->bind_values(0, Tensor{});
}

// The whole values may have been written since the last update (a checkpoint, replica 0's
// copy), so the shard is taken from them every step; it is 1/n of the parameters. (bf16: the
// masters are the shard, and what was written went there.)
void GatherUpdates::before_update() {
  if (how_.bf16) return;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Range mine = layout_.own(l, all_.rank());
    if (!mine.empty())
      backend_->copy(values_.view().range(mine.begin, mine.size()), shard_.view().range(layout_.offset(l), mine.size()));
  }
}

void GatherUpdates::after_update() {
  if (how_.bf16) {
    stale_ = true;
    return;
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Range r = layers_[l];
    if (r.empty()) continue;
    const Tensor from_layer = values_.view().range(r.begin, values_.view().numel() - r.begin);
    gather_layer(all_, layout_, l, shard_.view(), from_layer);
  }
}

void GatherUpdates::share_packed() {
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Range r = layers_[l];
    if (r.empty()) continue;
    const Tensor from_layer = packed_.view().range(r.begin, packed_.view().numel() - r.begin);
    gather_layer_bf16(*backend_, all_, layout_, l, shard_.view(), staging_.view(), from_layer);
  }
  stale_ = false;
}

void ShardGatherer::attach(ParamArena& arena, const std::vector<Range>& layers) {
  arena_ = &arena;
  layers_ = layers;
  layout_ = ShardLayout(layers, all_.size());
  shard_ = master_shard(arena.backend(), layout_, how_);
  bucket_ = layer_bucket(arena.backend(), layout_);
  if (how_.bf16) {
    packed_ = Buffer(arena.backend(), Shape{layout_.bucket_size()}, DType::bf16);
    staging_ = Buffer(arena.backend(), Shape{largest_chunk(layout_)}, DType::bf16);
  }
  arena.bind_values(0, Tensor{});
}

int64_t ShardGatherer::bytes() const {
  return bytes_of({&bucket_, &packed_, &staging_, &shard_}) - host_bytes();
}

void ShardGatherer::gather(size_t layer) {
  const Range r = layers_.at(layer);
  if (r.empty()) return;
  if (!how_.bf16) {
    arena_->bind_values(r.begin, gather_layer(all_, layout_, layer, shard_.view(), bucket_.view()));
    return;
  }
  const Tensor gathered = gather_layer_bf16(arena_->backend(), all_, layout_, layer, shard_.view(), staging_.view(), packed_.view());
  const Tensor values = bucket_.view().range(0, gathered.numel());
  arena_->backend().from_bf16(gathered, values);
  arena_->bind_values(r.begin, values);
}

}  // namespace distrain
