// Agent: `unipool agent`, the node agent. It joins the server as one node of
// the cluster file, keeps the node's lease with heartbeats, and runs what
// the server assigns: each job run's processes with the environment of
// PyTorch distributed training (launcher.h), stopped on cancel or
// preemption (SIGTERM, a grace period for a checkpoint, SIGKILL), reported
// when they end (succeeded, failed with a cause and a hint, stopped).
//
// Fencing: when no heartbeat has been acknowledged for two thirds of the
// lease, every process of every run dies, before the server (which waits
// the whole lease) can declare the node down and start the job elsewhere: a
// job never runs twice. The agent fences itself, and a watchdog process
// (watchdog.h) does it when the agent cannot (frozen, dead). Containment
// (containment.h) finds a run's processes however deep: a run that ends,
// is stopped or fenced leaves nothing behind.
//
// Outages (with an outage grace): a server that is down for everyone must
// not kill every job. Cut off for a third of the lease, the agent asks every
// live peer agent (the server lists them in heartbeat answers) how long it
// has been without the server. When this node and the peers silent for half
// a lease or more are a majority of the live nodes, the server, if it is up
// at all, sees most nodes silent and waits lease + grace before giving work
// away (ControlOptions::outage_grace); so the agent keeps its tasks, renewing
// its fence deadline a third of a lease at a time, up to the grace past its
// last heartbeat. Without that majority (it is the one cut off, or it
// reaches no one) it fences at 2/3 of the lease as always.
//
// Servers: --server may list the servers of `unipool server --ha`; one
// leads and the others redirect to it (307, followed). A call that gets no
// answer moves the agent to the next server (ServerFailed), at once until
// every one was tried, then at the loops' own pace; joining waits up to a
// minute for a server to answer. Final reports are kept until a server
// takes them (RetryReports).
//
// Progress: each process may append JSON lines to $UNIPOOL_REPORT_FILE:
//   {"step": 120, "loss": 2.31, "throughput": 5400, "gradNorm": 0.8,
//    "stepSeconds": 0.31, "dataSeconds": 0.02, "commSeconds": 0.08}
//   {"checkpoint": {"step": 100, "path": "...", "seconds": 4.2, "bytes": 1234}}
// (io/report_line.h). The agent forwards the latest progress (at most once
// a second) and every checkpoint of global rank 0, measuring its bytes on
// disk when the job gives its path but not its size (checkpoint_size.h);
// and, once a second, every rank's mean step/data/communication time since
// the last ("signals": the server's straggler watch).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/container.h"
#include "agent/containment.h"
#include "agent/launcher.h"
#include "agent/watchdog.h"
#include "agent/xid.h"
#include "core/base/units.h"
#include "io/proc_stat.h"
#include "server/gpu_sample.h"
#include "server/log.h"
#include "server/server_list.h"

namespace httplib {
class Client;
class Server;
}  // namespace httplib

namespace unipool::agent {

using Json = nlohmann::json;

struct AgentOptions {
  std::string server;                 // http(s)://host:port, or several: "URL,URL,..." (--ha)
  std::string ca_cert;                // PEM to trust for https
  std::string join_token;             // exchanged for the node's own token at start
  std::string node;                   // the node's name in the cluster file
  int gpus = -1;                      // -1: discover with nvidia-smi
  std::string address = "127.0.0.1";  // where other nodes reach this one
  std::string work_dir = "unipool-agent";
  std::string checkpoint_root;  // default for jobs without one; "" = work_dir/checkpoints
  // Where tenants' jobs may work and keep checkpoints (identity.h); empty:
  // checkpoint_root, /home, /scratch and /tmp.
  std::vector<std::string> job_dirs;
  // Jobs with an image: "none" (they fail, saying so), "host" (run on the
  // host, the image ignored), or a runtime of container.h; its template.
  std::string container_runtime = "none";
  std::string container_template;  // set from container_runtime unless given
  std::string pvc_root;            // PersistentVolumeClaim NAME is PVC_ROOT/NAME; "" = none
  std::string secret_dir;          // a secretKeyRef S/K of queue Q is DIR/Q/S/K; "" = none
  Duration heartbeat = Seconds(5);
  Duration lease = Seconds(30);  // the server's --node-lease
  std::string health_check;      // a program: exit 0 healthy, else its output says why
  Duration health_interval = Seconds(60);
  // Where the GPU driver's Xid errors are read (agent/xid.h), on nodes with
  // real GPUs; "" = not read.
  std::string kernel_log = "/dev/kmsg";
  int64_t min_free_disk_mb = 1024;              // built-in check of work_dir's disk
  std::string cgroup = "auto";                  // Containment: auto, off or a cgroup v2 directory
  std::string watchdog_exe = "/proc/self/exe";  // runs `agent-watchdog`; "" = no watchdog
  // 0: off (fence at 2/3 of the lease, always). Else the server's
  // --outage-grace: see "Outages" above.
  Duration outage_grace = Duration(0);
  LogLimits logs;                               // per process (log_file.h)
  int64_t log_budget_bytes = int64_t{8} << 30;  // all runs' files on this node
  Duration log_retention = Seconds(7 * 86400);  // a finished run's files are kept this long
  // Run (sh -c) when a run is declared hung, before it is killed, with
  // UNIPOOL_JOB_ID and UNIPOOL_PIDS set; "" = none. E.g.
  // 'for p in $UNIPOOL_PIDS; do py-spy dump --pid $p; done'.
  std::string hang_hook;
};

// The token in a file (its first line, trailing space removed); "" when
// the file cannot be read.
std::string ReadTokenFile(const std::string& path);

// GPUs found by `nvidia-smi` (-1 when it is missing or fails).
int DiscoverGpus();
// "ok", or what is wrong, from the exit code and output of `nvidia-smi
// --query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending
// --format=csv,noheader`.
std::string GpuHealthFrom(int exit_code, const std::string& csv);

struct ReportFile;  // agent_internal.h

// This node's wall clock minus the server's, ms, from one exchange: sent
// and received by this node's wall clock, the server's clock in its reply
// (the middle of the round trip, as NTP takes it). nullopt when the round
// trip took longer than `max_rtt_ms` (too vague to say).
std::optional<double> ClockOffsetMs(int64_t sent_ms, int64_t received_ms, int64_t server_ms,
                                    int64_t max_rtt_ms = 2000);

class Agent {
 public:
  Agent(AgentOptions options, server::Logger& log);
  ~Agent();

  // Joins the server (exchanging the join token for a node token) and
  // starts the log endpoint. Errors: server unreachable, refused, GPUs.
  Status Start();
  // Runs until Stop(); then stops every process it runs.
  void Run();
  void Stop();

 private:
  struct LocalRun;
  struct Workplace {  // of one run on this node
    Identity who;
    std::string working_dir;             // on the host; "" = the agent's
    std::string checkpoint_dir;          // UNIPOOL_CHECKPOINT_DIR
    std::vector<std::string> make_dirs;  // made by the job's user
    // With an image and a runtime (container.h):
    std::string image;
    std::vector<ContainerMount> mounts;  // an emptyDir's src: "empty-I" in the run's directory
    std::vector<size_t> empty_dirs;      // the I of each
    std::string container_workdir;       // spec.workingDir, in the container
    // Secret values: the assignment's, then secretKeyRefs read from --secret-dir.
    std::vector<std::pair<std::string, std::string>> secrets;
  };
  void HeartbeatLoop();
  void WatchLoop();
  void HealthLoop();
  void FenceLoop();
  std::unique_ptr<httplib::Client> Client(const std::string& token, int read_timeout_s) const;
  // The node's token: joins with `token` (a join token, the node's own or an
  // admin's) and returns the new one. Errors: kPermissionDenied (refused),
  // kFailedPrecondition (another agent holds the node), kUnavailable.
  Result<std::string> Join(const std::string& token) const;
  Status UseToken(const std::string& token);
  std::string Token() const;
  std::string TokenPath() const;  // work_dir/node.token (0600)
  void Rejoin();
  void StartContainment();
  int64_t FenceMs() const;  // 2/3 of the lease
  // When the tasks must be dead: 2/3 of the lease after the last
  // acknowledged heartbeat, or later while an outage is confirmed.
  int64_t FenceDeadline() const;
  void RenewDeadline();  // tells the watchdog FenceDeadline()
  void ServePeers();     // GET /peer/server
  bool TakePeers(const std::string& heartbeat_answer);
  // The answer's liveNodes differs from the peers' list: ask again.
  bool LiveNodesChanged(const std::string& heartbeat_answer);
  void EvidenceLoop();
  // How many of the live nodes, this one included, have been without the
  // server for half a lease or more (asked now).
  int64_t CountSilentPeers();
  void Reconcile(const Json& assignments);
  int64_t ClearingOf(const Json& assignment) const;
  void ConfirmGone(int64_t job, int64_t generation);
  void StartRun(const Json& a);
  void Finish(int64_t job, LocalRun& run);
  void ForwardReports(int64_t job, LocalRun& run);
  void AddSignals(ReportFile& file, const Json& line);
  void SendSignals(int64_t job, LocalRun& run);
  // The node's processes as /proc shows them, read at most once a second
  // however many runs send signals (one scan serves them all).
  const std::map<int64_t, io::ProcMemory>& Processes();
  Json MeasuredCheckpoint(const Json& reported, LocalRun& run);
  // True when the server answered (whatever it said).
  bool Report(int64_t job, int64_t generation, const std::string& kind, const std::string& msg,
              const Json& data = Json());
  void RetryReports();
  void CheckHung(int64_t job, LocalRun& run);
  void CleanLogs();
  // This node's processes of the assignment `a` (none when no task is
  // here). Errors: the run may not start here (identity.h), say why.
  Result<std::vector<ProcessSpec>> Processes(const Json& a, LocalRun& run) const;
  Result<Workplace> WorkplaceOf(const Json& a) const;
  // One process of a node's task: its rank past the task's first, and the
  // torchrun view (a per-task process is a "node" of its own).
  struct Slot {
    int64_t rank_offset, local_rank, local_world, node_rank, nnodes;
    std::string visible;  // CUDA_VISIBLE_DEVICES
    int64_t world = 0;    // > 0: WORLD_SIZE is the tasks and RANK the task's index
    std::vector<int> gpus;
  };
  // One process of this node in a run's membership: its global rank, its
  // launch view, and the torchrun variables (RANK, WORLD_SIZE) it gets.
  struct Member {
    int64_t rank;
    Slot slot;
    int64_t env_rank, env_world;
  };
  // This node's processes in assignment `a`, in launch order.
  std::vector<Member> MembersHere(const Json& a) const;
  // The rendezvous a process reads ($UNIPOOL_RENDEZVOUS_FILE): its place in
  // the membership of assignment `a` (docs/cli.md, "Elastic continue").
  static Json RendezvousOf(const Json& a, const Member& m);
  // An elastic continue run's membership changed: each process's
  // rendezvous file is rewritten (false: this node's part changed shape,
  // which only a restart can give).
  bool TellMembership(int64_t job, const Json& a, LocalRun& run);
  bool SetAsideForRejoin(int64_t job, const Json& a, const std::string& dir);
  // The processes of one node's GPUs `gpus` by launch mode (io::LaunchMode).
  static std::vector<Slot> Slots(const std::string& launch, const Json& spec,
                                 const std::vector<int>& gpus, int64_t node_rank, int64_t nnodes,
                                 int64_t world_size);
  Status MakeCheckpointDir(const std::string& dir, const Identity& who) const;
  Status ContainerOf(const Json& spec, bool tenant, Workplace* w) const;
  Status SecretsOf(const Json& a, Workplace* w) const;
  struct RunFiles {
    std::string report, rendezvous;  // the process's own (mounted in its container)
  };
  Status Containerize(const Workplace& w, const std::string& run_dir, const std::vector<int>& gpus,
                      const RunFiles& files, ProcessSpec* p) const;
  Status PrepareRunDir(const LocalRun& run) const;
  void ServeLogs();
  std::string Health();
  // The GPUs' last readings as the heartbeat sends them ([] for none).
  nlohmann::json GpuReadings();
  nlohmann::json XidCounts();  // [[gpu, xid, count], ...] since the agent started
  void OpenKernelLog();        // Start, on a node with real GPUs
  void ReadXids();             // HealthLoop
  std::string GpuHealth() const;

  AgentOptions options_;
  server::Logger& log_;
  mutable std::mutex token_mu_;
  std::string token_;                  // this node's own token (token_mu_)
  std::atomic<int64_t> token_gen_{0};  // changes with token_
  // The servers (one leads; the others redirect to it), tried in turn.
  mutable server::ServerList servers_{std::vector<std::string>{""}};
  // A call to `url` got no answer: the next server; loops that hold a
  // client make a new one (server_gen_ changes). True when that server has
  // not been tried in this round (try it now), false when the round is
  // done (wait first) or there is no other.
  Result<std::string> JoinPatiently(const std::string& token) const;
  bool ServerFailed(const std::string& url) const;
  mutable std::atomic<int64_t> server_gen_{0};
  std::string secret_;  // what the server presents to read logs
  std::string agent_url_;
  std::unique_ptr<httplib::Server> http_;
  std::thread http_thread_, heartbeat_thread_, watch_thread_, health_thread_, fence_thread_,
      evidence_thread_;

  std::atomic<bool> stop_{false};            // Stop(): the main loop ends and stops the runs
  std::atomic<bool> quit_{false};            // no run is left: heartbeats and fencing end
  httplib::Client* watch_client_ = nullptr;  // the long poll, cut short by Stop (mu_)
  std::atomic<int64_t> last_ok_ms_{0};       // last acknowledged heartbeat (steady clock)
  // This node's wall clock minus the server's, ms, from the last reply
  // that carried serverTimeMs (ClockOffsetMs); sent with each heartbeat.
  std::optional<double> clock_offset_ms_;  // the heartbeat thread's only
  std::mutex mu_;
  std::condition_variable changed_;
  Json assignments_;  // the latest, from WatchLoop
  bool fresh_ = false;
  bool gpus_discovered_ = false;  // real GPUs (nvidia-smi): checked for errors
  std::string health_ = "ok";
  std::vector<server::GpuSample> gpu_samples_;  // the last nvidia-smi readings (HealthLoop)
  KernelLogTail kernel_log_;                    // HealthLoop only
  XidLedger xids_{{}};                          // HealthLoop writes it under mu_
  std::set<int64_t> known_jobs_;                // for the long poll

  std::map<int64_t, std::unique_ptr<LocalRun>> runs_;  // by job; main loop only
  std::map<int64_t, io::ProcMemory> processes_;        // Processes(); main loop only
  int64_t processes_read_ms_ = -1;
  std::map<int64_t, int64_t> done_;                    // job -> generation that ended here
  // job -> the membership its run here had when it ended (an elastic
  // continue job may come back to this node in the same run, later).
  std::map<int64_t, int64_t> done_membership_;
  std::map<int64_t, int64_t> gone_sent_;  // job -> when "gone" was last sent; main loop only
  struct Pending {
    int64_t generation;
    std::string kind, message;
    Json data;
  };
  std::map<int64_t, Pending> unacked_;  // final reports not yet taken; main loop only
  int64_t last_retry_ms_ = 0;
  int64_t cleaned_ms_ = 0;
  std::atomic<bool> fenced_{false};
  std::atomic<int64_t> own_fences_{0};  // times FenceLoop fenced
  // Every fence so far, the agent's and the watchdog's: a run that saw one
  // was killed by it.
  int64_t FenceCount() const;
  std::unique_ptr<Containment> contain_;
  std::unique_ptr<Watchdog> watchdog_;  // null when it could not start

  // Outage evidence (with an outage grace).
  std::mutex peers_mu_;
  std::vector<std::string> peer_urls_;
  int64_t live_nodes_ = 0;
  std::string peer_secret_, old_peer_secret_;  // the old one: from before a server restart
  std::atomic<int64_t> outage_until_ms_{0};    // fence deadline while an outage is confirmed
  std::mutex pids_mu_;
  std::set<pid_t> pgids_;  // process groups of every run (the fence kills them)
};

}  // namespace unipool::agent
