// MPI communicator collectives, run under mpirun with 1..4 ranks (tests/CMakeLists.txt).
// Inputs are integers whose sums are exact in float32, so results are compared for
// equality (as nccl-tests' verifiable does).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/mesh.hpp"
#include "core/comm/hierarchical_communicator.hpp"
#include "core/comm/local_communicator.hpp"
#include "core/comm/mpi_communicator.hpp"

namespace distrain {
namespace {
Tensor host(std::vector<float>& v) { return Tensor{v.data(), Shape{static_cast<int64_t>(v.size())}, DType::f32, Device{}}; }
}  // namespace

TEST_CASE("mpi communicator: exact all_reduce, reduce_scatter, all_gather, broadcast") {
  MpiCommunicator c;
  const int n = c.size(), r = c.rank();
  REQUIRE(n == launcher_size());
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((r + 1) * 1000 + static_cast<int>(i));
  c.all_reduce(host(v), ReduceOp::sum);
  for (size_t i = 0; i < v.size(); ++i) CHECK(v[i] == static_cast<float>(1000 * n * (n + 1) / 2 + n * static_cast<int>(i)));

  std::vector<float> m{static_cast<float>(r)};
  c.all_reduce(host(m), ReduceOp::max);
  CHECK(m[0] == static_cast<float>(n - 1));

  std::vector<float> in(static_cast<size_t>(5 * n)), out(5);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i * (r + 1));
  c.reduce_scatter(host(in), host(out), ReduceOp::sum);
  for (int i = 0; i < 5; ++i) CHECK(out[static_cast<size_t>(i)] == static_cast<float>((5 * r + i) * n * (n + 1) / 2));

  std::vector<float> mine{static_cast<float>(r), static_cast<float>(-r)}, all(static_cast<size_t>(2 * n));
  c.all_gather(host(mine), host(all));
  for (int k = 0; k < n; ++k) CHECK(all[static_cast<size_t>(2 * k)] == static_cast<float>(k));

  std::vector<float> b{static_cast<float>(r * 7)};
  c.broadcast(host(b), n - 1);
  CHECK(b[0] == static_cast<float>((n - 1) * 7));
  double d[2] = {1.5, static_cast<double>(r)};
  c.all_reduce_f64(d, 2);
  CHECK(d[0] == 1.5 * n);
  c.barrier();
  // Counted: the five collectives above (not the float64 sum, not the barrier), each rank
  // sending the ring's share (n-1)/n of 2 x 1001 floats, 5n, 2n and 1.
  CHECK(c.traffic().collectives == 5);
  CHECK(c.traffic().bytes == doctest::Approx(4.0 * (2 * 1001 + 5 * n + 2 * n + 1) * (n - 1) / n));
}

TEST_CASE("hierarchical communicator: one replica per process, reduce_scatter and all_gather over the world") {
  MpiCommunicator world;
  auto group = std::make_shared<LocalGroup>(1);
  LocalCommunicator c(group, 0);
  HierarchicalCommunicator h(CommLevels{&c, &world}, HostStaging{});
  const int n = h.size(), r = h.rank();
  std::vector<float> in(static_cast<size_t>(3 * n)), out(3);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i * (r + 1));
  h.reduce_scatter(host(in), host(out), ReduceOp::sum);
  for (int i = 0; i < 3; ++i) CHECK(out[static_cast<size_t>(i)] == static_cast<float>((3 * r + i) * n * (n + 1) / 2));
  std::vector<float> mine{static_cast<float>(r)}, all(static_cast<size_t>(n));
  h.all_gather(host(mine), host(all));
  for (int k = 0; k < n; ++k) CHECK(all[static_cast<size_t>(k)] == static_cast<float>(k));
}

TEST_CASE("mpi communicator: send, recv and probe deliver exact messages") {
  MpiCommunicator c;
  const int n = c.size(), r = c.rank();
  // A ring of small float32 messages (small: each send completes before its recv is posted).
  std::vector<float> out{static_cast<float>(r), static_cast<float>(2 * r)}, in(2);
  c.send(host(out), (r + 1) % n, 7, "a ring message");
  c.recv(host(in), (r + n - 1) % n, 7, "a ring message");
  CHECK(in[0] == static_cast<float>((r + n - 1) % n));
  CHECK(in[1] == static_cast<float>(2 * ((r + n - 1) % n)));
  // Every other rank tells rank 0 its rank as float64; rank 0 takes them in arrival order.
  if (r > 0) {
    double mine = r;
    c.send(Tensor{&mine, Shape{1}, DType::f64, Device{}}, 0, 9, "a rank number");
  } else {
    std::vector<bool> heard(static_cast<size_t>(n), false);
    for (int i = 1; i < n; ++i) {
      const MpiCommunicator::Incoming m = c.probe(0).value();
      REQUIRE(m.tag == 9);
      double got = -1;
      c.recv(Tensor{&got, Shape{1}, DType::f64, Device{}}, m.source, m.tag, "a rank number");
      CHECK(got == static_cast<double>(m.source));
      heard[static_cast<size_t>(m.source)] = true;
    }
    for (int k = 1; k < n; ++k) CHECK(heard[static_cast<size_t>(k)]);
  }
  c.barrier();
}

// Run over TCP by dist_mpi_send_progress (tests/CMakeLists.txt): there a large message
// moves past its first fragment only inside an MPI call on the sending rank.
TEST_CASE("mpi communicator: a started send arrives while its rank computes, through progress()") {
  MpiCommunicator c;
  if (c.size() != 2) return;
  using clock = std::chrono::steady_clock;
  constexpr auto kComputing = std::chrono::milliseconds(1500);
  std::vector<float> message(size_t{4} << 20);  // 16 MB: many fragments
  for (size_t i = 0; i < message.size(); ++i) message[i] = static_cast<float>(i % 1000);
  c.barrier();
  const auto t0 = clock::now();
  if (c.rank() == 0) {
    const int64_t id = c.start_send(host(message), 1, 3, "a large message");
    while (clock::now() - t0 < kComputing) {  // a stage's layers: no MPI call but progress()
      const auto layer = clock::now();
      while (clock::now() - layer < std::chrono::milliseconds(1)) {}
      c.progress();
    }
    c.wait_send(id);
  } else {
    std::vector<float> in(message.size());
    c.recv(host(in), 0, 3, "a large message");
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - t0);
    CHECK(in == message);
    CHECK_MESSAGE(took < kComputing / 2, "the message took ", took.count(), " ms of the sender's ", kComputing.count());
  }
  c.barrier();
}

TEST_CASE("mpi mesh: each axis communicator sums exactly its group") {
  auto shared = std::make_shared<MpiCommunicator>();
  MpiCommunicator& world = *shared;
  const int n = world.size();
  const MeshShape shape = n % 2 == 0 ? MeshShape{n / 2, 2, 1} : MeshShape{1, 1, n};
  const Mesh mesh = Mesh::over_mpi(shape, shared);
  CHECK(mesh.coord() == coord_of(shape, world.rank()));
  for (Axis a : kMeshAxes) {
    std::vector<float> v{static_cast<float>(1 << world.rank())};  // distinct powers of two name the ranks summed
    mesh.axis(a).all_reduce(host(v), ReduceOp::sum);
    float want = 0;
    for (int g : axis_group(shape, world.rank(), a)) want += static_cast<float>(1 << g);
    CHECK(v[0] == want);
    CHECK(mesh.axis(a).rank() == mesh.coord().at(a));
  }
  world.barrier();
}

// The path a GPU rank takes (every tensor copied to host memory and back): sums along
// each axis, and a ring of messages on the pipeline axis whose tensors are overwritten
// before the sends are waited for: the staged copy is what travels.
TEST_CASE("mpi mesh staged: axis sums and a ring of messages through host copies") {
  auto shared = std::make_shared<MpiCommunicator>();
  MpiCommunicator& world = *shared;
  const int n = world.size(), r = world.rank();
  const MeshShape shape{1, 1, n};
  const HostStaging copies([](const Tensor& t, void* h) { std::memcpy(h, t.data, t.bytes()); },
                           [](const void* h, Tensor t) { std::memcpy(t.data, h, t.bytes()); });
  const Mesh mesh = Mesh::over_mpi(shape, shared).staged(copies, StagedCommunicator::Staged::every_tensor);
  std::vector<float> v{static_cast<float>(1 << r)};
  mesh.axis(Axis::pipeline).all_reduce(host(v), ReduceOp::sum);
  CHECK(v[0] == static_cast<float>((1 << n) - 1));
  if (n > 1) {
    Communicator& pipe = mesh.axis(Axis::pipeline);
    std::vector<float> out(1000, static_cast<float>(r)), in(1000, -1.0f);
    const int64_t id = pipe.start_send(host(out), (r + 1) % n, 5, "a ring message");
    std::fill(out.begin(), out.end(), -2.0f);
    pipe.recv(host(in), (r + n - 1) % n, 5, "a ring message");
    pipe.wait_send(id);
    CHECK(in == std::vector<float>(1000, static_cast<float>((r + n - 1) % n)));
  }
  world.barrier();
}

// Every rank of this test runs on one host: two of them share a value when the values
// repeat, none when each passes its rank.
TEST_CASE("mpi communicator: any_equal_on_a_host finds two ranks of a host with one value") {
  MpiCommunicator world;
  const int n = world.size(), r = world.rank();
  CHECK_FALSE(world.any_equal_on_a_host(r));
  CHECK(world.any_equal_on_a_host(r % 2) == (n > 2));
  CHECK(world.any_equal_on_a_host(0) == (n > 1));
  CHECK(world.split_by_host()->size() == n);
}

TEST_CASE("mpi communicator: a message that never comes times out naming the peer") {
  MpiCommunicator& c = *new MpiCommunicator;  // never freed: see the last test
  if (c.size() < 2 || c.rank() != 0) return;
  c.set_timeout(0.2);
  std::vector<float> none(3);
  std::string message;
  try {
    c.recv(host(none), 1, 11, "a message rank 1 never sends");
  } catch (const UserError& e) {
    message = e.what();
  }
  CHECK(message.find("rank 0: waiting for a message rank 1 never sends (rank 1) did not complete within 0.2 s") == 0);
  CHECK_FALSE(c.probe(0.2).has_value());
}

TEST_CASE("hierarchical communicator: 2 threads per process over the MPI world, exact, ranks process-major") {
  MpiCommunicator world;
  constexpr int kGroup = 2;
  auto group = std::make_shared<LocalGroup>(kGroup);
  const int n = world.size() * kGroup;
  std::vector<std::vector<float>> seen(kGroup);  // checked on the main thread, after join
  auto replica = [&](int local) {
    LocalCommunicator c(group, local);
    HierarchicalCommunicator h(CommLevels{&c, &world}, HostStaging{});
    const int r = h.rank();
    std::vector<float>& out = seen[static_cast<size_t>(local)];
    out = {static_cast<float>(r), static_cast<float>(h.size())};
    std::vector<float> v(100);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((r + 1) * 1000 + static_cast<int>(i));
    h.all_reduce(host(v), ReduceOp::sum);
    out.insert(out.end(), {v[0], v[99]});
    for (int root = 0; root < n; ++root) {
      std::vector<float> b{static_cast<float>(r * 7)};
      h.broadcast(host(b), root);
      out.push_back(b[0]);
    }
    h.barrier();
  };
  std::thread second(replica, 1);
  replica(0);  // the leader on the main thread: MPI is initialised funneled
  second.join();
  for (int local = 0; local < kGroup; ++local) {
    const std::vector<float>& out = seen[static_cast<size_t>(local)];
    REQUIRE(out.size() == static_cast<size_t>(4 + n));
    CHECK(out[0] == static_cast<float>(world.rank() * kGroup + local));
    CHECK(out[1] == static_cast<float>(n));
    CHECK(out[2] == static_cast<float>(1000 * n * (n + 1) / 2));
    CHECK(out[3] == static_cast<float>(1000 * n * (n + 1) / 2 + n * 99));
    for (int root = 0; root < n; ++root) CHECK(out[static_cast<size_t>(4 + root)] == static_cast<float>(root * 7));
  }
}

TEST_CASE("mpi communicator: a collective a rank is late for times out naming that rank") {
  // Never freed: freeing is collective, and the rank that timed out skips it (in a real job
  // it is about to abort), which would leave the others waiting in MPI_Win_free.
  MpiCommunicator& c = *new MpiCommunicator;
  if (c.size() < 2) return;
  c.set_timeout(0.3);
  c.barrier();  // collective #1, together
  if (c.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    c.barrier();  // the others entered #2 long ago: it completes at once
    return;
  }
  std::string message;
  try {
    c.barrier();
  } catch (const UserError& e) {
    message = e.what();
  }
  const std::string expected = "barrier #2 did not complete within 0.3 s: rank 1 (it is at collective #1) did not arrive";
  CHECK(message.find(fmt::format("rank {}: {}", c.rank(), expected)) == 0);
}

}  // namespace distrain

int main(int argc, char** argv) {
  distrain::ensure_mpi();
  doctest::Context context(argc, argv);
  const int failed = context.run();
  distrain::mpi_finalize();
  return failed;
}
