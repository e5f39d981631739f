// The parts of `unipool bench placement` (testdata/bench/README.md): the
// 800-gang workload, the figures measured on a run of it, and the live
// driver that runs it on a server as that server's agents would.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/client.h"
#include "core/base/status.h"
#include "core/sim/simulator.h"
#include "core/topology/topology.h"

namespace unipool::cli::placement {

struct GangJob {
  int64_t nodes = 0;
  int64_t seconds = 0;  // its run length
};

// `NODES SECONDS` per line; '#' starts a comment. Errors: the file cannot
// be read, a line is not two positive integers (named by its line), no jobs.
Result<std::vector<GangJob>> ReadWorkload(const std::string& path);

// What a run shows, and its bounds.
struct Figures {
  double makespan_s = 0, makespan_bound_s = 0, mean_wait_s = 0, node_time_used = 0;
  int64_t gangs = 0, fewest_leaves = 0, small = 0, small_spread = 0, multi_spine = 0;
  double leaves_per_gang = 0, leaves_bound = 0;
};

// REQUIRES: jobs[i] is how work[i] ran (submit, first_start, end and
// groups_used of its first placement), every one ended; times from the
// release of the workload at 0.
Figures Measure(const Topology& topo, const std::vector<GangJob>& work,
                const std::vector<sim::JobRecord>& jobs);

struct LiveOptions {
  std::string queue = "default";
  // Each job's time limit (the scheduler's runtime estimate) is its run
  // length plus this: the report that ends it must reach the server first.
  Duration slack = Seconds(1);
  Duration deadline = Seconds(600);  // the whole run
};

struct LiveRun {
  std::vector<sim::JobRecord> jobs;  // as Measure takes them
  int64_t submit_ms = 0;             // submitting all of them took
  int64_t late = 0;                  // ended by their time limit, not by a report
};

// Runs `work` on the server behind `client` as its agents would: submits
// each job in order (8-GPU tasks, one per node, to `opt.queue`), watches
// them start, and reports each one succeeded its run length after the
// server started it. Times are the server's, from the first submission.
// REQUIRES: the server runs `topo`'s cluster without agents
// (--assume-nodes-up) and nothing else runs on it.
// Errors: a failed call, a job placed on a node `topo` lacks or ended some
// other way (cancelled, failed), `opt.deadline` passed.
Result<LiveRun> RunLive(const ClientConfig& client, const Topology& topo,
                        const std::vector<GangJob>& work, const LiveOptions& opt);

}  // namespace unipool::cli::placement
