// The placement benchmark's workload and figures, and RunLive: the
// workload on a live server, driven as its agents would drive it. Two
// threads share one Run: the watcher follows the jobs' changes (GET
// /v1/watch) and books a report for each job that starts; the reporter
// posts each booked report when it falls due.
#include "cli/bench_placement.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <queue>
#include <set>
#include <sstream>
#include <thread>

#include "io/time_format.h"
#include "io/yaml_fields.h"

namespace unipool::cli::placement {
namespace {

using SystemClock = std::chrono::system_clock;

std::string JobName(size_t i) { return "gang-" + std::to_string(i + 1); }

// The job's index in the workload, from its name; -1 when not one of ours.
int64_t IndexOf(const std::string& name, size_t jobs) {
  if (!name.starts_with("gang-")) return -1;
  int64_t n = 0;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9' || n > static_cast<int64_t>(jobs)) return -1;
    n = n * 10 + (c - '0');
  }
  return n >= 1 && n <= static_cast<int64_t>(jobs) ? n - 1 : -1;
}

std::string JobSpec(size_t i, const GangJob& g, int64_t gpus_per_node, const LiveOptions& opt) {
  const int64_t limit_ms = g.seconds * 1000 + opt.slack.value() / 1000000;
  return "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: " + JobName(i) +
         "}\nspec:\n  command: [sleep, '3600']\n  gpus: " +
         std::to_string(g.nodes * gpus_per_node) +
         "\n  gpusPerNode: " + std::to_string(gpus_per_node) + "\n  queue: " + opt.queue +
         "\n  timeLimit: " + std::to_string(limit_ms) + "ms\n";
}

struct Due {
  SystemClock::time_point at;
  int64_t id = 0, generation = 0;
  bool operator>(const Due& o) const { return at > o.at; }
};

// What the two threads share, under `mu`.
struct Run {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int64_t> ids;     // per job; 0 until its submission is answered
  std::vector<Time> submitted;  // the server's clock
  std::vector<Time> started, ended;
  std::vector<std::vector<int32_t>> groups_used;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due;
  size_t ended_count = 0;
  int64_t late = 0;
  bool done = false;
  Status error;

  explicit Run(size_t n)
      : ids(n, 0), submitted(n), started(n, Time(-1)), ended(n, Time(-1)), groups_used(n) {}
  void Fail(Status st) {
    if (error.ok()) error = std::move(st);
    done = true;
    cv.notify_all();
  }
};

// The groups its tasks' nodes use at each tier. Errors: a node `topo` lacks.
Result<std::vector<int32_t>> GroupsUsed(const Topology& topo, const Json& tasks) {
  std::vector<std::set<int32_t>> groups(static_cast<size_t>(topo.num_tiers()));
  for (const Json& t : tasks) {
    const std::string name = t.value("node", "");
    const std::optional<NodeId> node = topo.FindNode(name);
    if (!node) return InvalidArgument("node '" + name + "' is not in the cluster file");
    for (int tier = 0; tier < topo.num_tiers(); ++tier) {
      groups[tier].insert(topo.group_of(*node, tier).value());
    }
  }
  std::vector<int32_t> used;
  for (const auto& g : groups) used.push_back(static_cast<int32_t>(g.size()));
  return used;
}

Result<Time> TimeOf(const Json& job, const char* key) {
  if (!job.contains(key) || !job[key].is_string()) {
    return InvalidArgument(std::string("the server's job has no '") + key + "' time");
  }
  return io::ParseTime(job[key].get<std::string>());
}

// One job's change, as the watcher sees it. REQUIRES: run.mu held.
Status Observe(const Topology& topo, const std::vector<GangJob>& work, const Json& job, Run& run) {
  const int64_t i = IndexOf(job.value("name", ""), work.size());
  if (i < 0 || !job.value("id", Json()).is_number_integer()) return Status::Ok();
  const int64_t id = job["id"].get<int64_t>();
  if (run.ids[i] != 0 && run.ids[i] != id) return Status::Ok();  // not this run's
  const std::string state = job.value("state", "");
  if (state == "Running" && run.started[i].value() < 0) {
    Result<Time> started = TimeOf(job, "started");
    if (!started.ok()) return started.status();
    Result<std::vector<int32_t>> used = GroupsUsed(topo, job.value("tasks", Json::array()));
    if (!used.ok()) return used.status();
    run.started[i] = *started;
    run.groups_used[i] = std::move(*used);
    const auto at = SystemClock::time_point(std::chrono::duration_cast<SystemClock::duration>(
        std::chrono::nanoseconds(started->value() + Seconds(work[i].seconds).value())));
    run.due.push(Due{at, id, job.value("generation", int64_t{0})});
    run.cv.notify_all();
  } else if ((state == "Succeeded" || state == "Failed") && run.ended[i].value() < 0) {
    if (run.started[i].value() < 0) {
      return FailedPrecondition("job " + std::to_string(id) + " ended " + state +
                                " before it was seen running: " + job.value("message", ""));
    }
    Result<Time> finished = TimeOf(job, "finished");
    if (!finished.ok()) return finished.status();
    run.ended[i] = *finished;
    ++run.ended_count;
    if (state == "Failed") ++run.late;  // its time limit came before the report
  } else if (state == "Cancelled" || state == "Preempting") {
    return FailedPrecondition("job " + std::to_string(id) + " is " + state +
                              ": something else acts on the server");
  }
  return Status::Ok();
}

void Watch(const ClientConfig& config, const Topology& topo, const std::vector<GangJob>& work,
           int64_t revision, SystemClock::time_point deadline, Run& run) {
  Client client(config);
  while (true) {
    {
      std::lock_guard lock(run.mu);
      if (run.done) return;
      if (run.ended_count == work.size()) {
        run.done = true;
        run.cv.notify_all();
        return;
      }
      if (SystemClock::now() > deadline) {
        return run.Fail(DeadlineExceeded("the run passed its deadline with " +
                                         std::to_string(work.size() - run.ended_count) +
                                         " jobs not ended"));
      }
    }
    Result<Json> r = client.Call(
        "GET", "/v1/watch?kind=jobs&timeoutSeconds=5&revision=" + std::to_string(revision), "",
        "application/json", 30);
    std::lock_guard lock(run.mu);
    if (!r.ok()) return run.Fail(r.status());
    revision = r->value("revision", revision);
    for (const Json& e : r->value("events", Json::array())) {
      if (e.value("type", "") != "PUT" || !e.contains("object")) continue;
      if (Status st = Observe(topo, work, e["object"], run); !st.ok()) return run.Fail(st);
    }
  }
}

void Report(const ClientConfig& config, Run& run) {
  Client client(config);
  std::unique_lock lock(run.mu);
  while (!run.done) {
    if (run.due.empty()) {
      run.cv.wait(lock);
      continue;
    }
    const Due next = run.due.top();
    if (SystemClock::now() < next.at) {
      run.cv.wait_until(lock, next.at);
      continue;
    }
    run.due.pop();
    lock.unlock();
    const Json body{{"generation", next.generation}, {"kind", "succeeded"}};
    Result<Json> r =
        client.Call("POST", "/v1/jobs/" + std::to_string(next.id) + "/report", body.dump());
    lock.lock();
    // 409: it ended meanwhile (its time limit); the watcher counts it.
    if (!r.ok() && r.status().code() != StatusCode::kFailedPrecondition) run.Fail(r.status());
  }
}

// Submits every job in order; the server's submission times go in `run`.
Status SubmitAll(const ClientConfig& config, const Topology& topo, const std::vector<GangJob>& work,
                 const LiveOptions& opt, Run& run) {
  Client client(config);
  const int64_t k = topo.node_gpus(NodeId(0)).value();
  for (size_t i = 0; i < work.size(); ++i) {
    Result<Json> r =
        client.Call("POST", "/v1/jobs", JobSpec(i, work[i], k, opt), "application/yaml");
    if (!r.ok()) return Status(r.status().code(), JobName(i) + ": " + r.status().message());
    Result<Time> at = TimeOf(*r, "submitted");
    if (!at.ok()) return at.status();
    std::lock_guard lock(run.mu);
    run.ids[i] = r->value("id", int64_t{0});
    run.submitted[i] = *at;
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<GangJob>> ReadWorkload(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open");
  std::vector<GangJob> jobs;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    std::string a, b, extra;
    if (!(fields >> a)) continue;
    GangJob j;
    if (!(fields >> b) || (fields >> extra) || !io::ParseInt64(a, &j.nodes) ||
        !io::ParseInt64(b, &j.seconds) || j.nodes < 1 || j.seconds < 1) {
      return InvalidArgument(path + ":" + std::to_string(line_no) +
                             ": expected 'NODES SECONDS' (two positive integers), got '" + line +
                             "'");
    }
    jobs.push_back(j);
  }
  if (jobs.empty()) return InvalidArgument(path + ": no jobs");
  return jobs;
}

Figures Measure(const Topology& topo, const std::vector<GangJob>& work,
                const std::vector<sim::JobRecord>& jobs) {
  Figures f;
  const int leaf = std::min(1, topo.num_tiers() - 1), spine = std::min(2, topo.num_tiers() - 1);
  const int64_t leaf_nodes = topo.group_num_nodes(leaf, GroupId(0));
  double node_seconds = 0, wait = 0, leaves = 0, bound = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const sim::JobRecord& r = jobs[i];
    node_seconds += static_cast<double>(work[i].nodes * work[i].seconds);
    f.makespan_s = std::max(f.makespan_s, ToSeconds(r.end));
    wait += ToSeconds(r.first_start - r.submit);
    const int64_t fewest = (work[i].nodes + leaf_nodes - 1) / leaf_nodes;
    const int32_t used = r.groups_used.empty() ? 0 : r.groups_used[leaf];
    if (work[i].nodes <= leaf_nodes) {
      ++f.small;
      f.small_spread += used > 1;
    }
    if (!r.groups_used.empty()) f.multi_spine += r.groups_used[spine] > 1;
    if (work[i].nodes < 2) continue;
    ++f.gangs;
    leaves += used;
    bound += static_cast<double>(fewest);
    f.fewest_leaves += used <= fewest;
  }
  const double n = static_cast<double>(jobs.size());
  f.mean_wait_s = wait / n;
  f.makespan_bound_s = node_seconds / topo.num_nodes();
  f.node_time_used = node_seconds / (topo.num_nodes() * f.makespan_s);
  f.leaves_per_gang = leaves / std::max<int64_t>(1, f.gangs);
  f.leaves_bound = bound / std::max<int64_t>(1, f.gangs);
  return f;
}

Result<LiveRun> RunLive(const ClientConfig& config, const Topology& topo,
                        const std::vector<GangJob>& work, const LiveOptions& opt) {
  Client client(config);
  Result<Json> list = client.Call("GET", "/v1/jobs?limit=1");
  if (!list.ok()) return list.status();
  const int64_t revision = list->value("revision", int64_t{0});
  const auto deadline = SystemClock::now() + std::chrono::nanoseconds(opt.deadline.value());
  Run run(work.size());
  std::thread watcher([&] { Watch(config, topo, work, revision, deadline, run); });
  std::thread reporter([&] { Report(config, run); });
  const auto t0 = std::chrono::steady_clock::now();
  Status submitted = SubmitAll(config, topo, work, opt, run);
  const auto t1 = std::chrono::steady_clock::now();
  if (!submitted.ok()) {
    std::lock_guard lock(run.mu);
    run.Fail(submitted);
  }
  watcher.join();
  {
    std::lock_guard lock(run.mu);
    run.done = true;
    run.cv.notify_all();
  }
  reporter.join();
  if (!run.error.ok()) return run.error;

  LiveRun out;
  out.submit_ms = std::chrono::duration_cast<std::chrono::milliseconds>(t1 - t0).count();
  out.late = run.late;
  const Time origin = *std::min_element(run.submitted.begin(), run.submitted.end());
  for (size_t i = 0; i < work.size(); ++i) {
    sim::JobRecord r;
    r.id = run.ids[i];
    r.name = JobName(i);
    r.submit = Time(run.submitted[i].value() - origin.value());
    r.first_start = Time(run.started[i].value() - origin.value());
    r.end = Time(run.ended[i].value() - origin.value());
    r.nodes = static_cast<int32_t>(work[i].nodes);
    r.groups_used = run.groups_used[i];
    out.jobs.push_back(std::move(r));
  }
  return out;
}

}  // namespace unipool::cli::placement
