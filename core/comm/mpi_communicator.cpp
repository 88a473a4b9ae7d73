#include "core/comm/mpi_communicator.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/ranges.h>

#include "core/base/error.hpp"

namespace distrain {

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw Error(fmt::format("mpi: {} failed: {}", what, std::string(text, static_cast<size_t>(len))));
}

MPI_Datatype mpi_type(const Tensor& t, std::string_view what) {
  DT_CHECK(t.device.is_cpu(), "mpi communicator: {} is on {}; it moves host (cpu) memory only", what, t.device.str());
  DT_CHECK(t.dtype == DType::f32 || t.dtype == DType::f64, "mpi communicator: {} is {}, not float32 or float64", what,
           dtype_name(t.dtype));
  return t.dtype == DType::f64 ? MPI_DOUBLE : MPI_FLOAT;
}

void check_f32(const Tensor& t, const char* what) {
  DT_CHECK(t.device.is_cpu(), "mpi communicator: {} is on {}; it moves host (cpu) memory only", what, t.device.str());
  DT_CHECK(t.dtype == DType::f32, "mpi communicator: {} is {}, only float32 is reduced", what, dtype_name(t.dtype));
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::sum ? MPI_SUM : MPI_MAX; }

}  // namespace

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_STEP_NUM_TASKS"})
    if (std::getenv(v)) return true;
  return false;
}

int launcher_rank() {
  return env_int("OMPI_COMM_WORLD_RANK", env_int("PMI_RANK", env_int("PMIX_RANK", env_int("SLURM_PROCID", 0))));
}

int launcher_size() {
  return env_int("OMPI_COMM_WORLD_SIZE", env_int("PMI_SIZE", env_int("SLURM_STEP_NUM_TASKS", 1)));
}

std::optional<int> launcher_local_rank() {
  if (!launched_by_mpi()) return 0;
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID", "MV2_COMM_WORLD_LOCAL_RANK"})
    if (std::getenv(v)) return env_int(v, 0);
  return std::nullopt;
}

int launcher_local_size() {
  // Slurm writes "2(x3)" for 2 tasks on each of 3 nodes: the leading count is this node's.
  return std::max(1, env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("MPI_LOCALNRANKS", env_int("SLURM_NTASKS_PER_NODE", 1))));
}

void ensure_mpi() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

void check_launch() {
  if (!launched_by_mpi()) {
    DT_USER_CHECK(env_int("WORLD_SIZE", 1) <= 1, "WORLD_SIZE={} (torchrun's variables) starts no distrain workers: launch "
                  "them with mpirun -np N (or srun --mpi=pmix) and strategy.name = \"multi_worker_mirrored\"",
                  env_int("WORLD_SIZE", 1));
    return;
  }
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  DT_USER_CHECK(size == launcher_size(), "the launcher started {} tasks but MPI sees {} process(es) in its world: with "
                "srun, use srun --mpi=pmix (or mpirun -np {})", launcher_size(), size, launcher_size());
}

void mpi_abort(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

void mpi_finalize() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(text, &len);
  std::string v(text, static_cast<size_t>(len));
  return v.substr(0, v.find_first_of(",\n"));
}

// The counters: one int64 per rank. On one node they sit in a shared-memory window and the
// others' are plain atomic loads, needing nothing from a stopped rank. Across hosts a
// one-sided read is not bounded (Open MPI's osc pt2pt blocks in MPI_Rget until the target
// answers, and a lost host never does), so ranks that time out hold a roll call instead:
// each sends its counter to every other on a communicator of their own and takes what
// arrives within a short deadline.
struct MpiCommunicator::Handle {
  MPI_Comm comm = MPI_COMM_WORLD;
  MPI_Comm roll = MPI_COMM_NULL;     // the roll call's, across hosts
  MPI_Win win = MPI_WIN_NULL;
  bool shared = false;
  bool broken = false;               // a collective timed out: freeing would wait for the stopped rank
  int64_t* mine = nullptr;           // this rank's counter
  int64_t own = 0;                   // the counter across hosts
  std::vector<int64_t*> peers;       // every rank's counter, when shared
  std::vector<int64_t> roll_out, roll_in;  // the roll call's messages: they outlive it (peers may never take them)
  std::vector<int> world_ranks;      // each member's rank in MPI_COMM_WORLD
  struct Started {
    MPI_Request req = MPI_REQUEST_NULL;
    int peer = 0;
    std::string what;
  };
  std::map<int64_t, Started> sends;  // start_send()s not yet waited for, by id
  int64_t next_send = 1;
};

namespace {

bool all_on_one_node(MPI_Comm comm, int size) {
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS) return false;
  int node_size = 0;
  MPI_Comm_size(node, &node_size);
  MPI_Comm_free(&node);
  return node_size == size;
}

void publish(int64_t* slot, int64_t value) { std::atomic_ref<int64_t>(*slot).store(value, std::memory_order_release); }

// Waits for `req`: polls for a short while (collectives among ranks in step finish in
// microseconds), yielding the core between tests so that a peer sharing it (more ranks than
// cores) runs instead of waiting out this rank's spin; then sleeps between tests, backing
// off to `max_nap` (MpiCommunicator::set_short_naps says which). Returns false at the
// deadline (none when timeout_s <= 0).
bool wait_until(MPI_Request& req, double timeout_s, const char* what, std::chrono::microseconds max_nap) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(timeout_s));
  auto nap = std::chrono::microseconds(10);
  for (;;) {
    int done = 0;
    check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), what);
    if (done) return true;
    const auto now = clock::now();
    if (timeout_s > 0 && now >= deadline) return false;
    if (now - t0 < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, max_nap);
  }
}

}  // namespace

MpiCommunicator::MpiCommunicator(std::unique_ptr<Handle> handle) : handle_(std::move(handle)) { init(); }

MpiCommunicator::MpiCommunicator(double timeout_seconds) : handle_(std::make_unique<Handle>()), timeout_s_(timeout_seconds) {
  ensure_mpi();
  init();
}

void MpiCommunicator::init() {
  Handle& h = *handle_;
  MPI_Comm_rank(h.comm, &rank_);
  MPI_Comm_size(h.comm, &size_);
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  MPI_Comm_group(h.comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> members(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) members[static_cast<size_t>(r)] = r;
  h.world_ranks.resize(members.size());
  check(MPI_Group_translate_ranks(group, size_, members.data(), world, h.world_ranks.data()), "MPI_Group_translate_ranks");
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  h.shared = all_on_one_node(h.comm, size_);
  const MPI_Aint bytes = sizeof(int64_t);
  if (h.shared) {
    check(MPI_Win_allocate_shared(bytes, sizeof(int64_t), MPI_INFO_NULL, h.comm, &h.mine, &h.win), "MPI_Win_allocate_shared");
    for (int r = 0; r < size_; ++r) {
      MPI_Aint size = 0;
      int unit = 0;
      int64_t* p = nullptr;
      check(MPI_Win_shared_query(h.win, r, &size, &unit, &p), "MPI_Win_shared_query");
      h.peers.push_back(p);
    }
  } else {
    h.mine = &h.own;
    check(MPI_Comm_dup(h.comm, &h.roll), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(h.roll, MPI_ERRORS_RETURN);
  }
  publish(h.mine, 0);
  check(MPI_Barrier(h.comm), "MPI_Barrier");  // every counter is 0 before anyone reads one
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // Freeing is collective: skip it when a rank is stopped or an error is on its way to
  // main (which aborts the job), lest this rank wait here for the others forever.
  if (finalized || handle_->broken || std::uncaught_exceptions() > 0) return;
  if (handle_->win != MPI_WIN_NULL) MPI_Win_free(&handle_->win);
  if (handle_->roll != MPI_COMM_NULL) MPI_Comm_free(&handle_->roll);
  if (handle_->comm != MPI_COMM_WORLD) MPI_Comm_free(&handle_->comm);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color) {
  auto h = std::make_unique<Handle>();
  check(MPI_Comm_split(handle_->comm, color, rank_, &h->comm), "MPI_Comm_split");
  return adopt(std::move(h));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split_by_host() {
  auto h = std::make_unique<Handle>();
  check(MPI_Comm_split_type(handle_->comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &h->comm), "MPI_Comm_split_type");
  return adopt(std::move(h));
}

bool MpiCommunicator::any_equal_on_a_host(int value) {
  const std::unique_ptr<MpiCommunicator> host = split_by_host();
  std::vector<float> values(static_cast<size_t>(host->size()));
  float mine = static_cast<float>(value);
  host->all_gather(host_tensor(&mine, 1), host_tensor(values.data(), host->size()));
  std::sort(values.begin(), values.end());
  float equal = std::adjacent_find(values.begin(), values.end()) != values.end() ? 1.0f : 0.0f;
  all_reduce(host_tensor(&equal, 1), ReduceOp::max);
  return equal > 0;
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::adopt(std::unique_ptr<Handle> h) {
  MPI_Comm_set_errhandler(h->comm, MPI_ERRORS_RETURN);
  auto c = std::unique_ptr<MpiCommunicator>(new MpiCommunicator(std::move(h)));
  c->set_timeout(timeout_s_);
  return c;
}

template <class Start>
void MpiCommunicator::run(const char* name, Start&& start) {
  publish(handle_->mine, ++seq_);
  MPI_Request req = MPI_REQUEST_NULL;
  check(start(&req), name);
  if (!wait_until(req, timeout_s_, name, collective_nap_)) timed_out(name, seq_);
}

// Every rank's counter; kNoAnswer for a rank that did not answer the roll call.
std::vector<int64_t> MpiCommunicator::read_counters() {
  Handle& h = *handle_;
  if (!h.shared) return roll_call();
  std::vector<int64_t> at(static_cast<size_t>(size_), 0);
  for (size_t r = 0; r < at.size(); ++r) at[r] = std::atomic_ref<int64_t>(*h.peers[r]).load(std::memory_order_acquire);
  return at;
}

std::vector<int64_t> MpiCommunicator::roll_call() {
  Handle& h = *handle_;
  const auto n = static_cast<size_t>(size_);
  h.roll_out.assign(1, *h.mine);
  h.roll_in.assign(n, kNoAnswer);
  std::vector<MPI_Request> recvs(n, MPI_REQUEST_NULL);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    MPI_Request send = MPI_REQUEST_NULL;
    MPI_Isend(h.roll_out.data(), 1, MPI_INT64_T, r, 0, h.roll, &send);
    MPI_Request_free(&send);  // a lost peer never takes it; the job ends anyway
    MPI_Irecv(&h.roll_in[static_cast<size_t>(r)], 1, MPI_INT64_T, r, 0, h.roll, &recvs[static_cast<size_t>(r)]);
  }
  std::vector<int64_t> at(n, kNoAnswer);
  at[static_cast<size_t>(rank_)] = *h.mine;
  const auto deadline = std::chrono::steady_clock::now() + kRollCallWait;
  size_t answered = 1;
  while (answered < n && std::chrono::steady_clock::now() < deadline) {
    for (size_t r = 0; r < n; ++r) {
      int done = 0;
      if (recvs[r] == MPI_REQUEST_NULL || MPI_Test(&recvs[r], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) continue;
      at[r] = h.roll_in[r];
      ++answered;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return at;
}

// The ranks that had not entered collective `seq`, or why they are unknown.
std::string MpiCommunicator::who_is_missing(int64_t seq) {
  const std::vector<int64_t> at = read_counters();
  std::vector<std::string> missing;
  for (size_t r = 0; r < at.size(); ++r) {
    const int world = world_rank(static_cast<int>(r));
    if (at[r] == kNoAnswer)
      missing.push_back(fmt::format("rank {} (no answer within {} s: its host, link or process is gone, or it is hung)", world,
                                    kRollCallWait.count()));
    else if (at[r] < seq)
      missing.push_back(fmt::format("rank {} (it is at collective #{})", world, at[r]));
  }
  if (missing.empty()) return "every rank entered it, so one stopped inside it";
  return fmt::format("{} did not arrive", fmt::join(missing, ", "));
}

int MpiCommunicator::world_rank(int rank) const { return handle_->world_ranks.at(static_cast<size_t>(rank)); }

void MpiCommunicator::timed_out(const char* name, int64_t seq) {
  // Ranks are named as in MPI_COMM_WORLD (the launcher's numbering); a sub-communicator's
  // collective says which ranks it spans.
  std::string among;
  if (handle_->comm != MPI_COMM_WORLD)
    among = size_ <= 8 ? fmt::format(" among ranks {}", fmt::join(handle_->world_ranks, ", "))
                       : fmt::format(" of a group of {} ranks", size_);
  fail(fmt::format("{} #{}{} did not complete within {:g} s: {}; it may be stopped or hung; "
                   "strategy.timeout_seconds sets this limit",
                   name, seq, among, timeout_s_, who_is_missing(seq)));
}

void MpiCommunicator::do_all_reduce(Tensor inout, ReduceOp op) {
  DT_CHECK(inout.device.is_cpu(), "mpi communicator: all_reduce tensor is on {}", inout.device.str());
  DT_CHECK(inout.dtype == DType::f32 || inout.dtype == DType::f64, "mpi all_reduce of {}", dtype_name(inout.dtype));
  run("all_reduce", [&](MPI_Request* req) {
    return MPI_Iallreduce(MPI_IN_PLACE, inout.data, static_cast<int>(inout.numel()),
                          inout.dtype == DType::f64 ? MPI_DOUBLE : MPI_FLOAT, mpi_op(op), handle_->comm, req);
  });
}

void MpiCommunicator::do_reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) {
  check_f32(in, "reduce_scatter input");
  check_f32(out, "reduce_scatter output");
  DT_CHECK(in.numel() == out.numel() * size_, "reduce_scatter: input {} is not {} x output {}", in.numel(), size_,
           out.numel());
  run("reduce_scatter", [&](MPI_Request* req) {
    return MPI_Ireduce_scatter_block(in.data, out.data, static_cast<int>(out.numel()), MPI_FLOAT, mpi_op(op), handle_->comm,
                                     req);
  });
}

void MpiCommunicator::do_all_gather(const Tensor& in, Tensor out) {
  for (const Tensor* t : std::initializer_list<const Tensor*>{&in, &out})
    DT_CHECK(t->device.is_cpu(), "mpi communicator: all_gather of {} memory; it moves host (cpu) memory only", t->device.str());
  check_gathered(in, out, "mpi");
  const MPI_Datatype type = in.dtype == DType::bf16 ? MPI_UINT16_T : MPI_FLOAT;  // a copy: bits suffice
  run("all_gather", [&](MPI_Request* req) {
    return MPI_Iallgather(in.data, static_cast<int>(in.numel()), type, out.data, static_cast<int>(in.numel()), type,
                          handle_->comm, req);
  });
}

void MpiCommunicator::do_broadcast(Tensor t, int root) {
  DT_CHECK(t.device.is_cpu(), "mpi communicator: broadcast tensor is on {}", t.device.str());
  broadcast_bytes(t.data, t.bytes(), root);
}

void MpiCommunicator::do_barrier() {
  run("barrier", [&](MPI_Request* req) { return MPI_Ibarrier(handle_->comm, req); });
}

void MpiCommunicator::broadcast_bytes(void* data, size_t bytes, int root) {
  run("broadcast",
      [&](MPI_Request* req) { return MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, handle_->comm, req); });
}

void MpiCommunicator::send(const Tensor& t, int peer, int tag, std::string_view what) {
  const MPI_Datatype type = mpi_type(t, what);
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Isend(t.data, static_cast<int>(t.numel()), type, peer, tag, handle_->comm, &req), "MPI_Isend");
  if (!wait_until(req, timeout_s_, "MPI_Isend", kLongNap)) message_timed_out(fmt::format("sending {}", what), peer);
}

int64_t MpiCommunicator::start_send(const Tensor& t, int peer, int tag, std::string_view what) {
  const MPI_Datatype type = mpi_type(t, what);
  Handle::Started started{MPI_REQUEST_NULL, peer, std::string(what)};
  check(MPI_Isend(t.data, static_cast<int>(t.numel()), type, peer, tag, handle_->comm, &started.req), "MPI_Isend");
  const int64_t id = handle_->next_send++;
  handle_->sends.emplace(id, std::move(started));
  return id;
}

void MpiCommunicator::wait_send(int64_t id) {
  const auto it = handle_->sends.find(id);
  if (it == handle_->sends.end()) return;
  Handle::Started started = std::move(it->second);
  handle_->sends.erase(it);
  if (!wait_until(started.req, timeout_s_, "MPI_Isend", kShortNap))
    message_timed_out(fmt::format("sending {}", started.what), started.peer);
}

void MpiCommunicator::progress() {
  for (auto& [id, started] : handle_->sends) {
    if (started.req == MPI_REQUEST_NULL) continue;  // done at an earlier test
    int done = 0;  // one test runs MPI's progress engine for every request in flight
    check(MPI_Test(&started.req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return;
  }
}

void MpiCommunicator::recv(Tensor t, int peer, int tag, std::string_view what) {
  const MPI_Datatype type = mpi_type(t, what);
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Irecv(t.data, static_cast<int>(t.numel()), type, peer, tag, handle_->comm, &req), "MPI_Irecv");
  if (!wait_until(req, timeout_s_, "MPI_Irecv", kShortNap)) message_timed_out(fmt::format("waiting for {}", what), peer);
}

std::optional<MpiCommunicator::Incoming> MpiCommunicator::probe(double seconds) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto nap = std::chrono::microseconds(10);
  for (;;) {
    int found = 0;
    MPI_Status st;
    check(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, handle_->comm, &found, &st), "MPI_Iprobe");
    if (found) return Incoming{st.MPI_SOURCE, st.MPI_TAG};
    const auto waited = clock::now() - t0;
    if (seconds > 0 && waited >= std::chrono::duration<double>(seconds)) return std::nullopt;
    if (waited < std::chrono::milliseconds(2)) continue;
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, kLongNap);
  }
}

void MpiCommunicator::fail(const std::string& why) {
  handle_->broken = true;
  throw UserError(fmt::format("rank {}: {}", world_rank(rank_), why));
}

// A message that did not come: unlike a collective's, the peer is known.
void MpiCommunicator::message_timed_out(std::string_view what, int peer) {
  fail(fmt::format("{} (rank {}) did not complete within {:g} s; that rank may be stopped or hung; "
                   "strategy.timeout_seconds sets this limit",
                   what, world_rank(peer), timeout_s_));
}

void MpiCommunicator::all_reduce_f64(double* values, int count) {
  run("all_reduce", [&](MPI_Request* req) {
    return MPI_Iallreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM, handle_->comm, req);
  });
}

}  // namespace distrain
