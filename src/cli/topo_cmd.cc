#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "core/topology/summary.h"
#include "io/cluster_reader.h"
#include "io/summary_writer.h"

namespace unipool::cli {
namespace {

struct TopoOptions {
  std::string file;
  std::string output = "text";
};

int RunTopo(const TopoOptions& opt) {
  Result<Topology> topo = io::LoadTopology(opt.file);
  if (!topo.ok()) {
    std::cerr << "error: " << topo.status().message() << "\n";
    return kExitBadInput;
  }
  const ClusterSummary summary = Summarize(*topo);
  std::cout << (opt.output == "json" ? io::SummaryJson(summary) : io::SummaryText(summary));
  return kExitOk;
}

}  // namespace

void AddTopoCommand(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<TopoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "topo",
      "Validate a cluster file and summarize it: tiers, bisection bandwidth, FLOP/s, power");
  cmd->add_option("FILE", opt->file, "cluster file (YAML, kind: Cluster)")->required();
  cmd->add_option("-o,--output", opt->output, "output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  cmd->callback([opt, &exit_code] { exit_code = RunTopo(*opt); });
}

}  // namespace unipool::cli
