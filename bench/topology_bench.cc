// Topology benchmarks on the bundled 1,048,576-GPU example: building the
// model from its file, and the queries the scheduler makes millions of times.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>

#include "core/topology/free_index.h"
#include "io/cluster_reader.h"

namespace unipool {
namespace {

const Topology& Million() {
  static const Topology topo = [] {
    Result<Topology> t = io::LoadTopology(UNIPOOL_SOURCE_DIR "/examples/clusters/super-1m.yaml");
    if (!t.ok()) std::abort();
    return std::move(t).value();
  }();
  return topo;
}

void BM_LoadMillionGpuCluster(benchmark::State& state) {
  for (auto _ : state) {
    Result<Topology> t = io::LoadTopology(UNIPOOL_SOURCE_DIR "/examples/clusters/super-1m.yaml");
    benchmark::DoNotOptimize(t.ok());
  }
}
BENCHMARK(BM_LoadMillionGpuCluster)->Unit(benchmark::kMillisecond);

void BM_LowestCommonTier(benchmark::State& state) {
  const Topology& t = Million();
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> gpu(0, static_cast<int32_t>(t.num_gpus().value()) - 1);
  std::vector<GpuId> ids(4096);
  for (auto& id : ids) id = GpuId(gpu(rng));
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(t.LowestCommonTier(ids[i & 4095], ids[(i + 1) & 4095]));
    ++i;
  }
}
BENCHMARK(BM_LowestCommonTier);

void BM_FreeUnderSwitch(benchmark::State& state) {
  const Topology& t = Million();
  FreeIndex free(t);
  int32_t g = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(free.free(1, GroupId(g)));
    g = (g + 7) % t.num_groups(1);
  }
}
BENCHMARK(BM_FreeUnderSwitch);

void BM_TakeGiveNode(benchmark::State& state) {
  const Topology& t = Million();
  FreeIndex free(t);
  int32_t n = 0;
  for (auto _ : state) {
    free.Take(NodeId(n), 0xFF);
    free.Give(NodeId(n), 0xFF);
    n = (n + 13) % t.num_nodes();
  }
}
BENCHMARK(BM_TakeGiveNode);

}  // namespace
}  // namespace unipool
