// Planner search time at the sizes the issue sets (one core):
//   Llama 3 405B on 16,384 H100s (examples/clusters/llama3-16k.yaml): < 1 s
//   a 1T-parameter GPT on 1,048,576 B200s (examples/clusters/super-1m.yaml): < 5 s
// plus a MoE case (DeepSeek-V3 on the 16K cluster), where expert parallelism
// widens the search. Topologies are built once, outside the timed loop.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <iostream>

#include "core/perf/planner.h"
#include "io/cluster_reader.h"

namespace unipool::perf {
namespace {

HardwareView Load(const char* file) {
  Result<Topology> t = io::LoadTopology(std::string(UNIPOOL_SOURCE_DIR) + "/" + file);
  if (!t.ok()) {
    std::cerr << t.status().message() << "\n";
    std::exit(1);
  }
  return *ViewOf(*t, t->num_gpus().value());
}

void Run(benchmark::State& state, const char* model, int64_t batch, const HardwareView& hw,
         bool explain) {
  const Job job{*FindBuiltinModel(model), batch, {}};
  SearchOptions o;
  o.explain = explain;
  int64_t evaluated = 0;
  for (auto _ : state) {
    Result<PlanSearch> r = Search(job, hw, o);
    if (!r.ok()) state.SkipWithError(r.status().message().c_str());
    evaluated = r.ok() ? r->evaluated : 0;
    benchmark::DoNotOptimize(r);
  }
  state.counters["plans_costed"] = static_cast<double>(evaluated);
}

void BM_PlanLlama405bOn16k(benchmark::State& state) {
  static const HardwareView hw = Load("examples/clusters/llama3-16k.yaml");
  Run(state, "llama3-405b", 2048, hw, state.range(0) != 0);
}
BENCHMARK(BM_PlanLlama405bOn16k)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_Plan1TOn1M(benchmark::State& state) {
  static const HardwareView hw = Load("examples/clusters/super-1m.yaml");
  Run(state, "gpt-1t", 16384, hw, state.range(0) != 0);
}
BENCHMARK(BM_Plan1TOn1M)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_PlanDeepSeekV3On16k(benchmark::State& state) {
  static const HardwareView hw = Load("examples/clusters/llama3-16k.yaml");
  Run(state, "deepseek-v3", 4096, hw, false);
}
BENCHMARK(BM_PlanDeepSeekV3On16k)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace unipool::perf
