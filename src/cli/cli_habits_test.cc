// The CLI as Slurm and kubectl users expect it (issue 15): get's columns
// (REASON, ELAPSED, EXIT, USED/FREE), -o name, watch output through a pipe,
// jobs that can never run, multi-document specs, cancel by filter,
// describe queue, "did you mean", the token hint and shell completion.
// A real server on loopback and the real binary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <thread>

#include "cli/cli_test_util.h"
#include "cli/server_test_util.h"

namespace unipool::testing {
namespace {

using Json = nlohmann::json;

std::string JobYaml(const std::string& name, int gpus, const std::string& extra = "",
                    const std::string& labels = "") {
  return "apiVersion: unipool/v1\nkind: Job\nmetadata:\n  name: " + name +
         (labels.empty() ? "" : "\n  labels: " + labels) +
         "\nspec:\n  command: [python3, train.py]\n  gpus: " + std::to_string(gpus) +
         "\n  queue: team-a\n" + extra;
}

int64_t Submit(const TestServer& s, const std::string& yaml) {
  HttpReply r = s.Call("POST", "/v1/jobs", "tenant-a", yaml, "application/yaml");
  EXPECT_EQ(r.status, 201) << r.body;
  return r.status == 201 ? r.json()["id"].get<int64_t>() : -1;
}

Json WaitForState(const TestServer& s, int64_t id, const std::string& state) {
  Json j;
  for (int i = 0; i < 200; ++i) {
    j = s.Call("GET", "/v1/jobs/" + std::to_string(id), "admin").json();
    if (j.value("state", "") == state) return j;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "job " << id << " never reached " << state << ": " << j.dump();
  return j;
}

HttpReply Report(const TestServer& s, int64_t id, const std::string& kind,
                 const std::string& message = "", Json data = Json()) {
  const Json j = s.Call("GET", "/v1/jobs/" + std::to_string(id), "admin").json();
  Json body{{"generation", j["generation"]}, {"kind", kind}, {"message", message}};
  if (!data.is_null()) body["data"] = data;
  return s.Call("POST", "/v1/jobs/" + std::to_string(id) + "/report", "admin", body.dump());
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// The value of `describe`'s field `key` ("Checkpoint"), trimmed.
std::string FieldOf(const std::string& out, const std::string& key) {
  for (const std::string& l : Lines(out)) {
    if (!l.starts_with(key + ":")) continue;
    const size_t v = l.find_first_not_of(' ', key.size() + 1);
    return v == std::string::npos ? "" : l.substr(v);
  }
  return "";
}

// The line of `table` whose first column is `key`.
std::string RowOf(const std::string& table, const std::string& key) {
  for (const std::string& l : Lines(table)) {
    if (l.starts_with(key + " ")) return l;
  }
  return "";
}

TEST(CliHabitsTest, GetShowsReasonElapsedExitAndNodeUsage) {
  TestServer s;
  s.Start();
  s.UseCli("admin");
  const int64_t run = Submit(s, JobYaml("runs", 24));
  WaitForState(s, run, "Running");
  const int64_t wait = Submit(s, JobYaml("waits", 16));  // 8 GPUs are free
  const int64_t fail = Submit(s, JobYaml("fails", 8));
  WaitForState(s, fail, "Running");
  ASSERT_EQ(Report(s, fail, "failed", "rank 0: exit code 3", {{"exitCode", 3}}).status, 200);
  // (it restarts after its backoff or fails: its exit code is kept either way)
  for (int i = 0; i < 100; ++i) {
    const Json p = s.Call("GET", "/v1/jobs/" + std::to_string(wait), "admin").json();
    if (p.value("reason", "") == "Resources") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  RunResult get = RunUnipool({"get", "jobs"});
  ASSERT_EQ(get.exit_code, 0) << get.err;
  const std::vector<std::string> lines = Lines(get.out);
  ASSERT_FALSE(lines.empty());
  for (const char* col : {"ELAPSED", "EXIT", "REASON"}) {
    EXPECT_NE(lines[0].find(col), std::string::npos) << lines[0];
  }
  const std::string pending = RowOf(get.out, std::to_string(wait));
  EXPECT_NE(pending.find("Pending"), std::string::npos) << get.out;
  EXPECT_NE(pending.find("Resources"), std::string::npos) << get.out;
  EXPECT_NE(RowOf(get.out, std::to_string(fail)).find("3:0"), std::string::npos) << get.out;
  EXPECT_EQ(RowOf(get.out, std::to_string(run)).find("Resources"), std::string::npos);

  RunResult names = RunUnipool({"get", "jobs", "-o", "name"});
  ASSERT_EQ(names.exit_code, 0) << names.err;
  EXPECT_NE(names.out.find("job/" + std::to_string(run) + "\n"), std::string::npos) << names.out;
  EXPECT_EQ(names.out.find("ID"), std::string::npos);

  // Nodes: GPUs used and free per node; states in any case.
  RunResult nodes = RunUnipool({"get", "nodes", "--state", "UP"});
  ASSERT_EQ(nodes.exit_code, 0) << nodes.err;
  EXPECT_NE(Lines(nodes.out)[0].find("USED"), std::string::npos) << nodes.out;
  EXPECT_NE(Lines(nodes.out)[0].find("FREE"), std::string::npos) << nodes.out;
  const Json list = s.Call("GET", "/v1/nodes", "admin").json();
  int64_t used = 0, free = 0;
  for (const Json& n : list["items"]) {
    used += n["gpusAllocated"].get<int64_t>();
    free += n["gpusFree"].get<int64_t>();
    EXPECT_NE(RowOf(nodes.out, n["name"]).find(" " + n["gpusAllocated"].dump() + " "),
              std::string::npos)
        << nodes.out;
  }
  const Json summary = s.Call("GET", "/v1/summary", "admin").json();
  EXPECT_EQ(used, summary["gpus"]["allocated"].get<int64_t>());
  EXPECT_EQ(free, summary["gpus"]["free"].get<int64_t>());
  RunResult node = RunUnipool({"describe", "node", "dev-0"});
  ASSERT_EQ(node.exit_code, 0) << node.err;
  EXPECT_NE(node.out.find("allocated"), std::string::npos) << node.out;
  EXPECT_NE(node.out.find("runs"), std::string::npos) << node.out;  // its job, by name
}

TEST(CliHabitsTest, JobsThatCanNeverRunAreSaidSo) {
  TestServer s;
  s.Start();
  s.UseCli("admin");
  ASSERT_EQ(RunUnipool({"queue", "set", "team-a", "--limit", "4"}).exit_code, 0);
  const std::string spec = s.dir() + "/big.yaml";
  std::ofstream(spec) << JobYaml("big", 8);
  RunResult dry = RunUnipool({"submit", "-f", spec, "--dry-run"});
  EXPECT_EQ(dry.exit_code, 1) << dry.out;
  EXPECT_NE(dry.err.find("can never run: needs 8 GPUs but queue 'team-a' is limited to 4"),
            std::string::npos)
      << dry.err;
  // 16 GPUs within one 8-GPU scale-up domain.
  ASSERT_EQ(RunUnipool({"queue", "set", "team-a", "--limit", "0"}).exit_code, 0);
  const std::string within = s.dir() + "/within.yaml";
  std::ofstream(within) << JobYaml("within", 16, "  topology:\n    within: nvlink\n");
  dry = RunUnipool({"submit", "-f", within, "--dry-run"});
  EXPECT_EQ(dry.exit_code, 1) << dry.out;
  EXPECT_NE(dry.err.find("can never run"), std::string::npos) << dry.err;
  // A fitting job is valid.
  const std::string fits = s.dir() + "/fits.yaml";
  std::ofstream(fits) << JobYaml("fits", 8);
  dry = RunUnipool({"submit", "-f", fits, "--dry-run"});
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  // Accepted (pending, reason Infeasible) unless the queue refuses them.
  RunResult sub = RunUnipool({"submit", "-f", within});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  ASSERT_EQ(RunUnipool({"queue", "set", "team-a", "--reject-infeasible", "true"}).exit_code, 0);
  EXPECT_EQ(s.Call("GET", "/v1/queues/team-a", "admin").json()["rejectInfeasible"], true);
  sub = RunUnipool({"submit", "-f", within});
  EXPECT_EQ(sub.exit_code, 1);
  EXPECT_NE(sub.err.find("rejectInfeasible"), std::string::npos) << sub.err;
  EXPECT_EQ(JobIds(s).size(), 1u);
  // queue set keeps what it was not told to change.
  EXPECT_EQ(s.Call("GET", "/v1/queues/team-a", "admin").json()["rejectInfeasible"], true);
  ASSERT_EQ(RunUnipool({"queue", "set", "team-a", "--weight", "3"}).exit_code, 0);
  EXPECT_EQ(s.Call("GET", "/v1/queues/team-a", "admin").json()["rejectInfeasible"], true);
}

TEST(CliHabitsTest, MultiDocumentSpecsAndCancelByFilter) {
  TestServer s;
  s.Start();
  s.UseCli("tenant-a");
  const std::string spec = s.dir() + "/sweep.yaml";
  std::ofstream(spec) << "# a sweep\n"
                      << JobYaml("lr-1", 1, "", "{sweep: s7}") << "---\n"
                      << JobYaml("lr-2", 1, "", "{sweep: s7}") << "--- # third\n"
                      << JobYaml("other", 1) << "---\n";
  RunResult sub = RunUnipool({"submit", "-f", spec, "-o", "name"});
  ASSERT_EQ(sub.exit_code, 0) << sub.err;
  EXPECT_EQ(sub.out, "job/1\njob/2\njob/3\n");
  // An error in the second document names its line in the file.
  const std::string bad = s.dir() + "/bad.yaml";
  std::ofstream(bad) << JobYaml("ok", 1) << "---\n" << JobYaml("bad", 1, "  gpuz: 3\n");
  RunResult err = RunUnipool({"submit", "-f", bad});
  EXPECT_EQ(err.exit_code, 2);
  EXPECT_NE(err.err.find(bad + ":18:"), std::string::npos) << err.err;
  EXPECT_NE(err.out.find("job/4 submitted"), std::string::npos) << err.out;

  RunResult dry = RunUnipool({"cancel", "-l", "sweep=s7", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_EQ(dry.out, "job/2 (dry run)\njob/1 (dry run)\n");
  RunResult cancel = RunUnipool({"cancel", "-l", "sweep=s7"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(cancel.out, "job/2 cancelled\njob/1 cancelled\n");
  // The job without the label is left alone: it starts (it may still have
  // been Pending when the others were cancelled) and is not cancelled.
  EXPECT_EQ(WaitForState(s, 3, "Running")["state"], "Running");
  RunResult none = RunUnipool({"cancel"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("-l, --queue, --state or --user"), std::string::npos) << none.err;
  cancel = RunUnipool({"cancel", "--queue", "team-a", "--user", "tenant-a"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(cancel.out, "job/4 cancelled\njob/3 cancelled\n");
}

TEST(CliHabitsTest, DescribeTellsTheTruth) {
  TestServer s(TestServer::Options{.extra_args = {"--min-runtime", "0s"}});
  s.Start();
  s.UseCli("admin");
  const int64_t low = Submit(s, JobYaml("low", 32, "  priorityClassName: low\n"));
  WaitForState(s, low, "Running");
  RunResult d = RunUnipool({"describe", std::to_string(low)});  // a bare id is a job
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(FieldOf(d.out, "Checkpoint"), "none") << d.out;
  EXPECT_EQ(d.out.find("1 GPUs"), std::string::npos) << d.out;
  for (int step = 10; step <= 50; step += 10) {
    ASSERT_EQ(Report(s, low, "checkpoint", "step " + std::to_string(step)).status, 200);
  }
  // What the checkpoints cost, as the job and its agent measure them.
  ASSERT_EQ(
      Report(s, low, "checkpoint", "step 55", {{"seconds", 2.5}, {"bytes", 3000000000}}).status,
      200);
  ASSERT_EQ(Report(s, low, "progress", "", {{"step", 56}}).status, 200);
  // Preempted; a checkpoint written in its grace saves its work.
  const int64_t high = Submit(s, JobYaml("high", 16, "  priorityClassName: high\n"));
  WaitForState(s, low, "Preempting");
  ASSERT_EQ(Report(s, low, "checkpoint", "step 60").status, 200);
  ASSERT_EQ(Report(s, low, "stopped").status, 200);
  const Json back = WaitForState(s, low, "Pending");
  EXPECT_LE(back["lostGpuSeconds"].get<int64_t>(), 32) << back.dump();  // at most a second
  d = RunUnipool({"describe", "job", std::to_string(low)});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  // Written in its grace: the job saves when stopped, which prices preempting it.
  EXPECT_TRUE(FieldOf(d.out, "Checkpoint")
                  .ends_with("(step 60), 7 checkpoints written; last measured 2.5 s, 3.0 GB; "
                             "saves when stopped"))
      << d.out;
  EXPECT_TRUE(FieldOf(d.out, "Start-up")
                  .ends_with(" s, from the last run's start to its first progress report"))
      << d.out;
  EXPECT_EQ(back["checkpointSeconds"], 2.5) << back.dump();
  EXPECT_EQ(back["checkpointBytes"], 3000000000) << back.dump();
  EXPECT_EQ(back["savesOnStop"], true) << back.dump();
  EXPECT_GT(back["startupSeconds"].get<double>(), 0) << back.dump();
  EXPECT_NE(d.out.find("checkpointed 6 times (last: step 55)"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("resumes from its checkpoint of"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("Reason:"), std::string::npos) << d.out;
  (void)high;

  RunResult q = RunUnipool({"describe", "queue", "team-a"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_NE(q.out.find("Running:"), std::string::npos) << q.out;
  EXPECT_NE(q.out.find("Infeasible:"), std::string::npos) << q.out;
  RunResult typo = RunUnipool({"describe", "nod", "dev-0"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("did you mean 'node'?"), std::string::npos) << typo.err;
}

TEST(CliHabitsTest, WatchPrintsChangedRowsThroughAPipe) {
  TestServer s;
  s.Start();
  s.UseCli("admin");
  const int64_t a = Submit(s, JobYaml("a", 8));
  WaitForState(s, a, "Running");
  const std::string out = s.dir() + "/watch.out";
  // The watch's stdout is a file (block-buffered unless flushed).
  std::thread watch([&] {
    const std::string cmd = std::string("timeout 6 ") + UNIPOOL_BINARY + " get jobs -w > " + out;
    (void)std::system(cmd.c_str());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  for (int step = 1; step <= 3; ++step) {  // changes no column shown
    ASSERT_EQ(Report(s, a, "checkpoint", "step " + std::to_string(step)).status, 200);
  }
  const int64_t b = Submit(s, JobYaml("b", 8));
  WaitForState(s, b, "Running");
  std::string text;
  for (int i = 0; i < 60 && text.find(" b ") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::ifstream in(out);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  watch.join();
  std::ifstream in(out);
  text.assign(std::istreambuf_iterator<char>(in), {});
  const std::vector<std::string> lines = Lines(text);
  ASSERT_GE(lines.size(), 3u) << text;
  EXPECT_TRUE(lines[0].starts_with("ID")) << text;
  int rows_a = 0;
  for (const std::string& l : lines) rows_a += l.starts_with(std::to_string(a) + " ");
  EXPECT_EQ(rows_a, 1) << text;  // listed once; checkpoints print nothing
  EXPECT_NE(text.find(" b "), std::string::npos) << text;
  // Columns line up with the header.
  const size_t state_col = lines[0].find("STATE");
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].substr(state_col).find_first_of("PRS"), 0u) << text;
  }
}

TEST(CliHabitsTest, HintsCompletionAndFormats) {
  RunResult del = RunUnipool({"delete", "job", "1"});
  EXPECT_EQ(del.exit_code, 2);
  EXPECT_NE(del.err.find("did you mean 'unipool cancel'?"), std::string::npos) << del.err;
  RunResult sq = RunUnipool({"squeue"});
  EXPECT_NE(sq.err.find("'unipool get jobs'"), std::string::npos) << sq.err;

  TestServer s;
  s.Start();
  setenv("UNIPOOL_SERVER", s.url().c_str(), 1);
  unsetenv("UNIPOOL_TOKEN");
  setenv("UNIPOOL_CONFIG", "/dev/null", 1);
  RunResult denied = RunUnipool({"get", "jobs"});
  EXPECT_EQ(denied.exit_code, 4);
  EXPECT_NE(denied.err.find("set UNIPOOL_TOKEN"), std::string::npos) << denied.err;
  unsetenv("UNIPOOL_CONFIG");

  RunResult bash = RunUnipool({"completion", "bash"});
  ASSERT_EQ(bash.exit_code, 0) << bash.err;
  EXPECT_NE(bash.out.find("complete -F _unipool unipool"), std::string::npos);
  EXPECT_NE(bash.out.find("--dry-run"), std::string::npos);
  const std::string script = s.dir() + "/completion.bash";
  std::ofstream(script) << bash.out;
  // It parses, and completes a command and a kind.
  const std::string check = "bash -c 'source " + script +
                            " && COMP_WORDS=(unipool ca); COMP_CWORD=1; _unipool && "
                            "[ \"${COMPREPLY[*]}\" = cancel ] && COMP_WORDS=(unipool get no); "
                            "COMP_CWORD=2; _unipool && [ \"${COMPREPLY[*]}\" = nodes ]'";
  EXPECT_EQ(std::system(check.c_str()), 0) << bash.out.substr(0, 2000);
  EXPECT_EQ(RunUnipool({"completion", "zsh"}).exit_code, 0);
  // The manual page: every command, and roff that man renders.
  RunResult man = RunUnipool({"man"});
  ASSERT_EQ(man.exit_code, 0) << man.err;
  for (const char* section : {".TH UNIPOOL 1", ".SS \"unipool submit\"", ".SS \"unipool acct\"",
                              ".SS \"unipool queue set\"", ".SH EXIT STATUS"}) {
    EXPECT_NE(man.out.find(section), std::string::npos) << section;
  }
  const std::string page = s.dir() + "/unipool.1";
  std::ofstream(page) << man.out;
  if (access("/usr/bin/man", X_OK) == 0) {
    EXPECT_EQ(std::system(("MANWIDTH=100 man -l " + page + " > " + page + ".txt 2>&1").c_str()), 0);
    std::ifstream txt(page + ".txt");
    const std::string rendered((std::istreambuf_iterator<char>(txt)), {});
    EXPECT_NE(rendered.find("--reject-infeasible"), std::string::npos) << rendered.substr(0, 3000);
  }

  RunResult topo = RunUnipool({"topo", "examples/clusters/devbox.yaml", "-o", "json"});
  ASSERT_EQ(topo.exit_code, 0) << topo.err;
  EXPECT_FALSE(std::regex_search(topo.out, std::regex("\\.[0-9]*(000000|999999)"))) << topo.out;
}

}  // namespace
}  // namespace unipool::testing

namespace unipool::testing {
namespace {

// Accounting: GPU-hours per job and totals by queue and user (sacct and
// sreport), and fair-share usage per queue (sshare).
TEST(CliHabitsTest, AcctCountsGpuHoursAndQueuesShowTheirFairShare) {
  TestServer s;
  s.Start();
  s.UseCli("admin");
  const int64_t a = Submit(s, JobYaml("a", 16));
  WaitForState(s, a, "Running");
  HttpReply b = s.Call("POST", "/v1/jobs", "tenant-b",
                       "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: b}\n"
                       "spec: {command: [sleep, '9'], gpus: 8, queue: team-b}\n",
                       "application/yaml");
  ASSERT_EQ(b.status, 201) << b.body;
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // whole GPU-seconds
  ASSERT_EQ(Report(s, a, "succeeded").status, 200);
  WaitForState(s, a, "Succeeded");
  RunResult acct = RunUnipool({"acct", "--since", "1h", "-o", "json"});
  ASSERT_EQ(acct.exit_code, 0) << acct.err;
  const Json j = Json::parse(acct.out);
  ASSERT_EQ(j["jobs"].size(), 2u) << acct.out;
  int64_t sum = 0;
  for (const Json& row : j["jobs"]) {
    sum += row["gpuSeconds"].get<int64_t>();
    if (row["id"] == a) {
      EXPECT_GE(row["gpuSeconds"].get<int64_t>(), 16 * 2) << row.dump();
      EXPECT_EQ(row["state"], "Succeeded");
    }
  }
  EXPECT_EQ(j["gpuSeconds"], sum);
  ASSERT_EQ(j["byQueue"].size(), 2u) << acct.out;
  EXPECT_EQ(j["byQueue"][0]["queue"], "team-a");
  EXPECT_EQ(j["byQueue"][0]["byState"]["Succeeded"], 1);
  EXPECT_EQ(j["byUser"][1]["user"], "tenant-b");
  RunResult table = RunUnipool({"acct", "--since", "1h", "--totals"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("GPU-HOURS"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("By user:"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("ELAPSED"), std::string::npos) << table.out;  // totals only
  RunResult tenant = RunUnipool({"acct", "--since", "1h", "--token", s.token("tenant-b")});
  ASSERT_EQ(tenant.exit_code, 0) << tenant.err;
  EXPECT_EQ(tenant.out.find("team-a"), std::string::npos) << tenant.out;  // its own only
  RunResult bad = RunUnipool({"acct", "--until", "yesterday"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;

  // Fair share: team-a used 16 GPUs for 2 s, team-b 8 GPUs meanwhile.
  const Json qa = s.Call("GET", "/v1/queues/team-a", "admin").json();
  const Json qb = s.Call("GET", "/v1/queues/team-b", "admin").json();
  EXPECT_GT(qa["usageGpuHours"].get<double>(), qb["usageGpuHours"].get<double>()) << qa.dump();
  EXPECT_LT(qa["fairShare"].get<double>(), qb["fairShare"].get<double>());
  RunResult wide = RunUnipool({"get", "queues", "-o", "wide"});
  EXPECT_NE(wide.out.find("FAIRSHARE"), std::string::npos) << wide.out;
  RunResult d = RunUnipool({"describe", "queue", "team-a"});
  EXPECT_NE(d.out.find("Fair share:"), std::string::npos) << d.out;

  // The usage is kept in the store: a restart starts from it, decayed.
  const double before = qa["usageGpuHours"].get<double>();
  s.Stop();
  s.Start();
  const Json again = s.Call("GET", "/v1/queues/team-a", "admin").json();
  EXPECT_GE(again["usageGpuHours"].get<double>(), 0.99 * before)
      << again.dump();  // 7-day half-life
}

}  // namespace
}  // namespace unipool::testing
