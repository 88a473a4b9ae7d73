// The device mesh: rank layout (tensor innermost, pipeline outermost), axis groups, the
// degree check, one communicator per axis whose sums are exactly the group's, and the data
// axis the data-parallel strategies are given.
#include <atomic>
#include <cstring>
#include <thread>

#include "core/comm/local_communicator.hpp"
#include "core/comm/mesh.hpp"
#include "core/io/recipe.hpp"
#include "core/strategy/replica_mesh.hpp"
#include "tests/unit/helpers.hpp"

namespace distrain::test {
namespace {

TEST_CASE("mesh: tensor innermost, then data, pipeline outermost") {
  const MeshShape shape{2, 3, 2};  // data 2, tensor 3, pipeline 2: 12 ranks
  CHECK(coord_of(shape, 0) == MeshCoord{0, 0, 0});
  CHECK(coord_of(shape, 1) == MeshCoord{0, 1, 0});  // the next rank is the next tensor shard
  CHECK(coord_of(shape, 3) == MeshCoord{1, 0, 0});
  CHECK(coord_of(shape, 6) == MeshCoord{0, 0, 1});
  CHECK(coord_of(shape, 11) == MeshCoord{1, 2, 1});
  for (int r = 0; r < shape.size(); ++r) CHECK(rank_of(shape, coord_of(shape, r)) == r);
  CHECK(axis_group(shape, 4, Axis::tensor) == std::vector<int>{3, 4, 5});
  CHECK(axis_group(shape, 4, Axis::data) == std::vector<int>{1, 4});
  CHECK(axis_group(shape, 4, Axis::pipeline) == std::vector<int>{4, 10});
}

TEST_CASE("mesh: degrees must multiply to the world size") {
  CHECK_NOTHROW(check_mesh(MeshShape{2, 2, 1}, 4, "r.toml"));
  CHECK_THROWS_WITH_AS(
      check_mesh(MeshShape{2, 2, 1}, 8, "r.toml"),
      doctest::Contains("r.toml: the mesh data 2 x tensor 2 x pipeline 1 has 4 ranks, but the job has 8; launch with mpirun -np 4"),
      UserError);
  CHECK_THROWS_WITH_AS(check_mesh(MeshShape{0, 2, 1}, 0, "r.toml"),
                       doctest::Contains("r.toml: strategy.data = 0; a mesh degree is at least 1"), UserError);
}

TEST_CASE("mesh over threads: each axis communicator sums exactly its group") {
  const MeshShape shape{2, 2, 2};
  std::vector<Mesh> meshes = Mesh::over_threads(shape);
  REQUIRE(meshes.size() == 8);
  std::vector<std::array<float, 3>> sums(8);
  std::vector<std::thread> threads;
  for (int r = 0; r < 8; ++r)
    threads.emplace_back([&, r] {
      const Mesh& m = meshes[static_cast<size_t>(r)];
      for (Axis a : kMeshAxes) {
        float v = static_cast<float>(1 << r);  // a sum of distinct powers of two names its ranks
        m.axis(a).all_reduce(Tensor{&v, Shape{1}, DType::f32, Device{}}, ReduceOp::sum);
        sums[static_cast<size_t>(r)][static_cast<size_t>(a)] = v;
        CHECK(m.axis(a).rank() == m.coord().at(a));
        CHECK(m.axis(a).size() == shape.degree(a));
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 8; ++r)
    for (Axis a : kMeshAxes) {
      float want = 0;
      for (int g : axis_group(shape, r, a)) want += static_cast<float>(1 << g);
      CHECK(sums[static_cast<size_t>(r)][static_cast<size_t>(a)] == want);
    }
}

TEST_CASE("mesh over threads: the world spans every rank, and an abort wakes a rank waiting in any group") {
  const MeshShape shape{2, 1, 2};
  std::vector<Mesh> meshes = Mesh::over_threads(shape);
  std::vector<float> sums(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      float v = static_cast<float>(r + 1);
      meshes[static_cast<size_t>(r)].world().all_reduce(Tensor{&v, Shape{1}, DType::f32, Device{}}, ReduceOp::sum);
      sums[static_cast<size_t>(r)] = v;
    });
  for (auto& t : threads) t.join();
  CHECK(sums == std::vector<float>{10, 10, 10, 10});
  CHECK(meshes[3].world().rank() == 3);
  // Rank 1 waits in its data group for rank 0, which never comes: rank 0 aborts the mesh.
  std::string caught;
  std::thread waiting([&] {
    float v = 1;
    try {
      meshes[1].axis(Axis::data).all_reduce(Tensor{&v, Shape{1}, DType::f32, Device{}}, ReduceOp::sum);
    } catch (const GroupAborted& e) {
      caught = e.what();
    }
  });
  meshes[0].abort("rank 0 failed");
  waiting.join();
  CHECK(caught.find("rank 0 failed") != std::string::npos);
}

TEST_CASE("replica mesh: the data-parallel strategies' replicas on the data axis alone") {
  const Recipe recipe = parse_recipe(R"(
[data]
dataset = "synthetic"
image_shape = [4, 4, 1]
[model]
input_shape = [4, 4, 1]
layers = [{ type = "flatten" }, { type = "dense", units = 10 }]
[strategy]
name = "mirrored"
devices = ["cpu:0", "cpu:1", "cpu:2"]
)", "replicas.toml");
  const ReplicaMesh replicas(recipe, ReplicaMesh::Workers::none);
  REQUIRE(replicas.local_replicas() == 3);
  CHECK(replicas.workers() == nullptr);
  std::vector<float> sums(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      const Mesh& m = replicas.replica(r);
      CHECK(m.shape() == MeshShape{3, 1, 1});
      CHECK(m.coord() == MeshCoord{r, 0, 0});
      CHECK(&m.world() == &m.axis(Axis::data));  // data parallelism is the whole mesh
      float v = static_cast<float>(1 << r), alone = 7;
      m.axis(Axis::data).all_reduce(Tensor{&v, Shape{1}, DType::f32, Device{}}, ReduceOp::sum);
      m.axis(Axis::tensor).all_reduce(Tensor{&alone, Shape{1}, DType::f32, Device{}}, ReduceOp::sum);  // a group of one
      sums[static_cast<size_t>(r)] = v + alone;
    });
  for (auto& t : threads) t.join();
  CHECK(sums == std::vector<float>{14, 14, 14});
  // Replica 2 waits for the others, which never come: an abort wakes it.
  std::string caught;
  std::thread waiting([&] {
    float v = 1;
    try {
      replicas.replica(2).axis(Axis::data).all_reduce(Tensor{&v, Shape{1}, DType::f32, Device{}}, ReduceOp::sum);
    } catch (const GroupAborted& e) {
      caught = e.what();
    }
  });
  replicas.abort("replica 0 failed");
  waiting.join();
  CHECK(caught.find("replica 0 failed") != std::string::npos);
}

// Every collective and a message each way on the data axis of a 2-rank mesh, from each
// rank's thread; what each rank ended with.
std::vector<std::vector<float>> exchange_on_data_axis(const std::vector<Mesh>& meshes) {
  std::vector<std::vector<float>> got(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      Communicator& c = meshes[static_cast<size_t>(r)].axis(Axis::data);
      const float k = static_cast<float>(r + 1);
      std::vector<float> sum{k, 2 * k}, scatter{k, 10 * k, 100 * k, 1000 * k}, mine{k}, gathered(2), block(2),
          message{5 * k, 6 * k}, received(2), root{k, k};
      c.all_reduce(host_tensor(sum.data(), 2), ReduceOp::sum);
      c.reduce_scatter(host_tensor(scatter.data(), 4), host_tensor(block.data(), 2), ReduceOp::sum);
      c.all_gather(host_tensor(mine.data(), 1), host_tensor(gathered.data(), 2));
      c.broadcast(host_tensor(root.data(), 2), 1);
      const int64_t id = c.start_send(host_tensor(message.data(), 2), 1 - r, 3, "a test message");
      c.recv(host_tensor(received.data(), 2), 1 - r, 3, "a test message");
      c.wait_send(id);
      auto& g = got[static_cast<size_t>(r)];
      for (const auto* v : {&sum, &block, &gathered, &root, &received}) g.insert(g.end(), v->begin(), v->end());
    });
  for (auto& t : threads) t.join();
  return got;
}

// The path a GPU rank's tensors take (Mesh::staged), on host memory: every collective and
// message copied out and back by the staging, or the collectives on a "GPU" communicator
// of their own (NCCL's place; here threads), the results the host communicators' own.
TEST_CASE("mesh staged: exchanges through host copies, or collectives on the GPU communicator, give the unstaged results") {
  const MeshShape shape{2, 1, 1};
  const std::vector<Mesh> plain = Mesh::over_threads(shape);
  const std::vector<std::vector<float>> want{{3, 6, 3, 30, 1, 2, 2, 2, 10, 12}, {3, 6, 300, 3000, 1, 2, 2, 2, 5, 6}};
  CHECK(exchange_on_data_axis(plain) == want);
  std::atomic<int> downloads = 0, uploads = 0;
  const HostStaging counting([&](const Tensor& t, void* host) { ++downloads; std::memcpy(host, t.data, t.bytes()); },
                             [&](const void* host, Tensor t) { ++uploads; std::memcpy(t.data, host, t.bytes()); });
  using Staged = StagedCommunicator::Staged;
  auto staged = [&](Staged which, const std::vector<Mesh::Axes>& gpu) {
    downloads = uploads = 0;
    std::vector<Mesh> meshes;
    for (size_t r = 0; r < plain.size(); ++r) meshes.push_back(plain[r].staged(counting, which, gpu.empty() ? Mesh::Axes{} : gpu[r]));
    return exchange_on_data_axis(meshes);
  };
  CHECK(staged(Staged::every_tensor, {}) == want);
  CHECK(downloads == 2 * 5);  // each rank: 4 collectives and a send (a recv downloads nothing)
  CHECK(uploads == 2 * 5);    // 4 collectives and a recv
  CHECK(staged(Staged::gpu_tensors, {}) == want);  // host tensors pass straight through
  CHECK(downloads + uploads == 0);
  auto group = std::make_shared<LocalGroup>(2);
  std::vector<Mesh::Axes> gpu(2);
  for (int r = 0; r < 2; ++r) gpu[static_cast<size_t>(r)][0] = std::make_shared<LocalCommunicator>(group, r);  // data axis
  CHECK(staged(Staged::every_tensor, gpu) == want);
  CHECK(downloads == 2);  // the send's copy only
  CHECK(uploads == 2);    // the recv's
  CHECK(gpu[0][0]->traffic().collectives == 4);
}

}  // namespace
}  // namespace distrain::test
