// Agent, launching a run: who its processes are (identity.h), where they
// work, their environment and ranks by launch mode, their container
// (container.h), and the run's directory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "agent/agent_internal.h"
#include "agent/container.h"

namespace unipool::agent {
namespace fs = std::filesystem;

namespace {

// UNIPOOL_CHECKPOINT_INTERVAL: the server's advice in whole seconds
// (checkpointIntervalSeconds of the assignment); "" when it gives none.
std::string CheckpointIntervalEnv(const Json& a) {
  const Json s = a.value("checkpointIntervalSeconds", Json());
  if (!s.is_number() || !(s.get<double>() >= 1) || s.get<double>() > 1e9) return "";
  return std::to_string(static_cast<int64_t>(s.get<double>() + 0.5));
}

}  // namespace

io::TaskLimits LimitsOf(const Json& spec) {
  const Json l = spec.value("limits", Json::object());
  return {l.value("milliCpu", int64_t{0}), l.value("memoryBytes", int64_t{0}),
          l.value("pids", int64_t{0})};
}

int64_t TasksOn(const Json& a, const std::string& node) {
  const int64_t per_task = a["spec"].value("gpusPerTask", int64_t{0});
  int64_t gpus = 0;
  for (const Json& t : a["tasks"]) {
    if (t["node"] == node) gpus += static_cast<int64_t>(t["gpus"].size());
  }
  return per_task > 0 ? std::max<int64_t>(1, gpus / per_task) : 1;
}

// Who the run's processes are and where they work (identity.h), from the
// assignment: errors say why the run may not start here.
Result<Agent::Workplace> Agent::WorkplaceOf(const Json& a) const {
  const Json& spec = a["spec"];
  const Json id = a.value("identity", Json::object());
  RunAsRequest req{id.value("runAs", ""), id.value("tenant", false), id.value("allowRoot", false)};
  Result<Identity> who = DecideIdentity(req, geteuid());
  if (!who.ok()) return who.status();
  Workplace w;
  w.who = *who;
  const bool tenant = req.tenant;
  // With an image the working directory is the container's (as in a pod).
  if (const std::string image = spec.value("image", ""); !image.empty()) {
    UNIPOOL_RETURN_IF_ERROR(ContainerOf(spec, tenant, &w));
  }
  // A relative path is the job's home's (the agent's directory for its own user).
  const std::string base = who->switch_user ? who->home : fs::current_path().string();
  if (const std::string dir = spec.value("workingDir", ""); !w.image.empty()) {
    w.container_workdir = dir;
  } else if (!dir.empty()) {
    Result<std::string> wd = ResolveJobPath(dir, base, "spec.workingDir");
    if (!wd.ok()) return wd.status();
    if (tenant) UNIPOOL_RETURN_IF_ERROR(CheckUnderRoots(*wd, options_.job_dirs, "spec.workingDir"));
    w.working_dir = *wd;
  } else if (who->switch_user) {  // the user's home, as a login would
    w.working_dir = fs::is_directory(who->home) ? who->home : "/";
  }
  const bool in_container = !w.image.empty();
  if (const std::string dir = spec.value("checkpointDir", ""); !dir.empty()) {
    Result<std::string> c = ResolveJobPath(
        dir, w.working_dir.empty() || in_container ? base : w.working_dir, "spec.checkpoint.dir");
    if (!c.ok()) return c.status();
    if (tenant)
      UNIPOOL_RETURN_IF_ERROR(CheckUnderRoots(*c, options_.job_dirs, "spec.checkpoint.dir"));
    w.checkpoint_dir = *c;
    w.make_dirs.push_back(*c);  // made by the job's user, never by the agent
  } else {
    w.checkpoint_dir = options_.checkpoint_root + "/job-" + a["id"].dump();
    UNIPOOL_RETURN_IF_ERROR(MakeCheckpointDir(w.checkpoint_dir, *who));
  }
  if (in_container) w.mounts.push_back({w.checkpoint_dir, w.checkpoint_dir, false});
  UNIPOOL_RETURN_IF_ERROR(SecretsOf(a, &w));
  return w;
}

// The assignment's secret values, and each secretKeyRef read from
// --secret-dir/QUEUE/SECRET/KEY (the queue is the namespace: a job reads
// only its own queue's secrets).
Status Agent::SecretsOf(const Json& a, Workplace* w) const {
  for (const Json& e : a.value("secretEnv", Json::array())) {
    w->secrets.emplace_back(e.value("name", ""), e.value("value", ""));
  }
  const Json& spec = a["spec"];
  for (const Json& r : spec.value("secretRefs", Json::array())) {
    const std::string name = r.value("name", ""), ref = r.value("ref", "");
    if (options_.secret_dir.empty()) {
      return FailedPrecondition("spec.env[" + name + "]: secret " + ref +
                                ": this node has no secrets (the agent's --secret-dir)");
    }
    const std::string path = options_.secret_dir + "/" + spec.value("queue", "") + "/" + ref;
    std::ifstream in(path);
    if (!in) {
      return FailedPrecondition("spec.env[" + name + "]: secret " + ref + ": no file " + path +
                                " on this node");
    }
    w->secrets.emplace_back(name, std::string(std::istreambuf_iterator<char>(in), {}));
  }
  return Status::Ok();
}

// A job with an image: the node's runtime, and the spec's volumes as host
// directories (hostPath, a PersistentVolumeClaim under --pvc-root, an
// emptyDir in the run's directory). Errors say what the node lacks.
Status Agent::ContainerOf(const Json& spec, bool tenant, Workplace* w) const {
  const std::string image = spec["image"];
  if (options_.container_runtime == "host") return Status::Ok();  // the image is ignored
  if (options_.container_template.empty()) {
    return FailedPrecondition("spec.image: " + image +
                              ": this node runs no container runtime (the agent's "
                              "--container-runtime; host runs such jobs on the host, ignoring "
                              "the image)");
  }
  if (image.starts_with("-")) {
    return FailedPrecondition("spec.image: '" + image + "' is not an image name");
  }
  w->image = image;
  const std::vector<Json> mounts = spec.value("mounts", std::vector<Json>());
  for (size_t i = 0; i < mounts.size(); ++i) {
    const std::string source = mounts[i].value("source", "");
    const std::string at = "spec.mounts[" + std::to_string(i) + "]";
    ContainerMount m{"", mounts[i].value("path", ""), mounts[i].value("readOnly", false)};
    if (source.starts_with("hostPath:")) {
      m.src = source.substr(9);
      if (tenant) {  // a tenant's: only where its jobs may work
        UNIPOOL_RETURN_IF_ERROR(
            CheckUnderRoots(m.src, options_.job_dirs, (at + ".source").c_str()));
      }
    } else if (source.starts_with("pvc:")) {
      if (options_.pvc_root.empty()) {
        return FailedPrecondition(at + ": PersistentVolumeClaim " + source.substr(4) +
                                  ": this node maps no claims to directories (the agent's "
                                  "--pvc-root)");
      }
      // Claims are the queue's, as a namespace's in Kubernetes.
      m.src = options_.pvc_root + "/" + spec.value("queue", "") + "/" + source.substr(4);
    } else if (source == "emptyDir") {
      m.src = "empty-" + std::to_string(i);  // made in the run's directory (PrepareRunDir)
      w->empty_dirs.push_back(i);
    } else {
      return FailedPrecondition(at + ": " + source +
                                " cannot be mounted here (mount it on the nodes and use "
                                "hostPath)");
    }
    if (!m.src.starts_with("empty-") && !fs::is_directory(m.src)) {
      return FailedPrecondition(at + ": " + m.src + " is not a directory on this node");
    }
    w->mounts.push_back(std::move(m));
  }
  return Status::Ok();
}

// The process `p` run through the node's runtime: its argv becomes the
// runtime's, with the job's mounts, its report and rendezvous files and
// its GPUs.
Status Agent::Containerize(const Workplace& w, const std::string& run_dir,
                           const std::vector<int>& gpus, const RunFiles& files,
                           ProcessSpec* p) const {
  ContainerRun c;
  c.image = w.image;
  c.workdir = w.container_workdir;
  c.uid = w.who.uid;
  c.gid = w.who.gid;
  c.mounts = w.mounts;
  for (ContainerMount& m : c.mounts) {
    if (m.src.starts_with("empty-")) m.src = run_dir + "/" + m.src;
  }
  c.mounts.push_back({files.report, files.report, false});
  c.mounts.push_back({files.rendezvous, files.rendezvous, true});
  c.devices = GpuDevices(gpus);
  for (const auto& [name, value] : p->env) c.env_names.push_back(name);
  c.command = p->argv;
  Result<std::vector<std::string>> argv = ExpandTemplate(options_.container_template, c);
  if (!argv.ok()) return argv.status();
  p->argv = std::move(argv).value();
  return Status::Ok();
}

// The default checkpoint directory, made by the agent (its root is the
// agent's) and given to the job's user, mode 0700; refused when it exists
// and belongs to someone else.
Status Agent::MakeCheckpointDir(const std::string& dir, const Identity& who) const {
  std::error_code ec;
  fs::create_directories(options_.checkpoint_root, ec);
  if (who.switch_user && options_.checkpoint_root == options_.work_dir + "/checkpoints") {
    chmod(options_.checkpoint_root.c_str(), 0711);  // the agent's own: others list nothing
  }
  const bool made = mkdir(dir.c_str(), 0700) == 0;
  // By descriptor, never through a link: the root may be shared storage.
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    return FailedPrecondition("cannot create the checkpoint directory " + dir +
                              " (or it is not a directory)");
  }
  Status out = Status::Ok();
  if (who.switch_user) {
    // One that was there must be this job's user's (an earlier run, another
    // node): a directory made by anyone else is not given away.
    if (!made && st.st_uid != who.uid) {
      out = FailedPrecondition("checkpoint directory " + dir + " belongs to uid " +
                               std::to_string(st.st_uid) + ", not the job's user " + who.user);
    } else if (fchown(fd, who.uid, who.gid) != 0 || fchmod(fd, 0700) != 0) {
      out = FailedPrecondition("cannot give the checkpoint directory " + dir + " to " + who.user);
    }
  }
  close(fd);
  return out;
}

std::vector<Agent::Member> Agent::MembersHere(const Json& a) const {
  const Json& spec = a["spec"];
  const Json& world = a["world"];
  const std::string launch = spec.value("launch", "per-gpu");
  const int64_t world_size = world["worldSize"].get<int64_t>();
  std::vector<Member> out;
  for (const Json& t : a["tasks"]) {
    if (t["node"] != options_.node) continue;
    const std::vector<int> gpus = t["gpus"];
    const int64_t first = t["firstRank"];
    for (Slot& slot : Slots(launch, spec, gpus, t["nodeRank"], world["nnodes"], world_size)) {
      const int64_t rank = first + slot.rank_offset;
      if (slot.node_rank < 0) slot.node_rank = rank / slot.local_world;  // a task's index
      const bool tasks = slot.world > 0;  // a per-task process: RANK is the task's
      out.push_back(
          Member{rank, slot, tasks ? slot.node_rank : rank, tasks ? slot.world : world_size});
    }
  }
  return out;
}

Json Agent::RendezvousOf(const Json& a, const Member& m) {
  const Json& world = a["world"];
  return Json{{"version", world.value("membership", int64_t{0})},
              {"rank", m.env_rank},
              {"worldSize", m.env_world},
              {"localRank", m.slot.local_rank},
              {"localWorldSize", m.slot.local_world},
              {"groupRank", m.slot.node_rank},
              {"nnodes", m.slot.nnodes},
              {"masterAddr", world["masterAddr"]},
              {"masterPort", world["masterPort"]},
              {"restartCount", a["generation"].get<int64_t>() - 1},
              {"runId", std::to_string(a["id"].get<int64_t>())}};
}

Status WriteRendezvous(const std::string& path, const Json& rendezvous) {
  const std::string text = rendezvous.dump() + "\n";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return Unavailable("cannot write " + path + ": " + std::strerror(errno));
  const ssize_t n = write(fd, text.data(), text.size());
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) return Unavailable("cannot write " + path);
  return Status::Ok();
}

Result<std::vector<ProcessSpec>> Agent::Processes(const Json& a, LocalRun& run) const {
  const Json& spec = a["spec"];
  const Json& world = a["world"];
  const int64_t id = a["id"];
  std::vector<std::string> argv = spec["command"].get<std::vector<std::string>>();
  for (const Json& arg : spec.value("args", Json::array())) argv.push_back(arg);
  const std::string launch = spec.value("launch", "per-gpu");
  const std::vector<Member> members = MembersHere(a);
  std::vector<ProcessSpec> out;
  if (members.empty()) return out;  // nothing of it runs here
  Result<Workplace> w = WorkplaceOf(a);
  if (!w.ok()) return w.status();
  run.place = std::move(w).value();
  run.membership = world.value("membership", int64_t{0});
  const bool elastic = spec.value("elasticContinue", false);
  for (const Member& m : members) {
    const Slot& slot = m.slot;
    ProcessSpec p;
    p.argv = argv;
    p.rank = static_cast<int>(m.rank);
    p.working_dir = run.place.working_dir;
    p.as = run.place.who;
    p.make_dirs = run.place.make_dirs;
    p.log_path = run.dir + "/rank-" + std::to_string(p.rank) + ".log";
    p.log_limits = options_.logs;
    const std::string report = run.dir + "/report-rank-" + std::to_string(p.rank) + ".jsonl";
    const std::string rendezvous = run.dir + "/rendezvous-rank-" + std::to_string(p.rank) + ".json";
    // The node's base, then the job's variables, then the launch's own
    // (which the job cannot change: its GPUs, ranks and the agent's tags).
    p.env = BaseEnvironment(p.as, environ);
    p.env.emplace_back("PYTHONUNBUFFERED", "1");
    for (const Json& e : spec.value("env", Json::array())) {
      p.env.emplace_back(e.value("name", ""), e.value("value", ""));
    }
    p.env.insert(p.env.end(), run.place.secrets.begin(), run.place.secrets.end());
    const std::string addr = world["masterAddr"];
    const std::string port = std::to_string(world["masterPort"].get<int>());
    const std::string restarts = std::to_string(run.generation - 1);
    for (auto& kv : std::vector<std::pair<std::string, std::string>>{
             {"MASTER_ADDR", addr},
             {"MASTER_PORT", port},
             {"WORLD_SIZE", std::to_string(m.env_world)},
             {"RANK", std::to_string(m.env_rank)},
             {"LOCAL_RANK", std::to_string(slot.local_rank)},
             {"LOCAL_WORLD_SIZE", std::to_string(slot.local_world)},
             {"NODE_RANK", std::to_string(slot.node_rank)},
             {"GROUP_RANK", std::to_string(slot.node_rank)},
             {"NNODES", std::to_string(slot.nnodes)},
             {"NPROC_PER_NODE", std::to_string(slot.local_world)},
             {"CUDA_VISIBLE_DEVICES", slot.visible},
             {"UNIPOOL_JOB_ID", std::to_string(id)},
             {"UNIPOOL_JOB_NAME", a.value("name", "")},
             {"UNIPOOL_RESTART_COUNT", restarts},
             {"TORCHELASTIC_RESTART_COUNT", restarts},
             {"TORCHELASTIC_RUN_ID", std::to_string(id)},
             {"UNIPOOL_CHECKPOINT_DIR", run.place.checkpoint_dir},
             {"UNIPOOL_REPORT_FILE", report},
             {"UNIPOOL_RENDEZVOUS_FILE", rendezvous},
             {"UNIPOOL_NODE", options_.node}}) {
      p.env.push_back(std::move(kv));
    }
    if (std::string every = CheckpointIntervalEnv(a); !every.empty()) {
      p.env.emplace_back("UNIPOOL_CHECKPOINT_INTERVAL", std::move(every));
    }
    if (elastic) p.env.emplace_back("UNIPOOL_ELASTIC", "continue");
    if (launch != "per-gpu") {  // torchrun in the process reads its defaults from PET_*
      for (auto& kv : std::vector<std::pair<std::string, std::string>>{
               {"PET_NNODES", std::to_string(slot.nnodes)},
               {"PET_NODE_RANK", std::to_string(slot.node_rank)},
               {"PET_NPROC_PER_NODE", std::to_string(slot.local_world)},
               {"PET_MASTER_ADDR", addr},
               {"PET_MASTER_PORT", port}}) {
        p.env.push_back(std::move(kv));
      }
    }
    if (!run.place.image.empty()) {
      UNIPOOL_RETURN_IF_ERROR(
          Containerize(run.place, run.dir, slot.gpus, {report, rendezvous}, &p));
    }
    run.reports.push_back(ReportFile{report, 0, p.rank});
    run.rendezvous.push_back(rendezvous);
    if (p.rank == 0) run.report0 = report;
    if (p.rank == 0) run.rank0 = true;
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<Agent::Slot> Agent::Slots(const std::string& launch, const Json& spec,
                                      const std::vector<int>& gpus, int64_t node_rank,
                                      int64_t nnodes, int64_t world_size) {
  auto slot = [&](int64_t offset, int64_t local_rank, int64_t local_world, int64_t node,
                  int64_t nodes, size_t from, size_t n, int64_t world) {
    Slot s{offset, local_rank, local_world, node, nodes, "", world, {}};
    for (size_t i = from; i < from + n && i < gpus.size(); ++i) {
      s.visible += (s.visible.empty() ? "" : ",") + std::to_string(gpus[i]);
      s.gpus.push_back(gpus[i]);
    }
    return s;
  };
  const int64_t all = static_cast<int64_t>(gpus.size());
  std::vector<Slot> out;
  if (launch == "per-node") {
    out.push_back(slot(0, 0, all, node_rank, nnodes, 0, gpus.size(), 0));
  } else if (launch == "per-task") {
    // One process per task of gpusPerTask GPUs (a pod): a "node" to torchrun
    // (PET_*), and to a plain script rank RANK of WORLD_SIZE tasks, as
    // Kubeflow's PyTorchJob sets them for its pods.
    const int64_t per = spec.value("gpusPerTask", int64_t{0});
    const int64_t task = std::max<int64_t>(1, per > 0 ? per : all);
    for (int64_t i = 0; i * task < all; ++i) {
      out.push_back(slot(i * task, 0, task, -1, world_size / task, static_cast<size_t>(i * task),
                         static_cast<size_t>(task), world_size / task));
    }
  } else {
    for (int64_t i = 0; i < all; ++i) {
      out.push_back(slot(i, i, all, node_rank, nnodes, 0, gpus.size(), 0));
    }
  }
  return out;
}

// The run's directory: logs the agent's user alone reads (mode 0600), and
// each process's report file, which its user may write. With a user switch
// the directories are 0711: the job reaches its own report file by name,
// and lists nothing.
Status Agent::PrepareRunDir(const LocalRun& run) const {
  std::error_code ec;
  fs::create_directories(run.dir, ec);
  if (ec) return Unavailable("cannot create " + run.dir + ": " + ec.message());
  // (As root every run may be another user's: the modes do not depend on
  // this run, so one run cannot shut another out.)
  const bool shared = geteuid() == 0;
  const fs::perms mode = shared
                             ? fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec
                             : fs::perms::owner_all;
  for (const fs::path& d : {fs::path(options_.work_dir), fs::path(options_.work_dir) / "jobs",
                            fs::path(run.dir).parent_path(), fs::path(run.dir)}) {
    fs::permissions(d, mode, ec);
  }
  for (size_t i : run.place.empty_dirs) {  // a pod's emptyDir volumes: the job's user's
    const std::string dir = run.dir + "/empty-" + std::to_string(i);
    if (mkdir(dir.c_str(), 0700) != 0 ||
        (run.place.who.switch_user &&
         chown(dir.c_str(), run.place.who.uid, run.place.who.gid) != 0)) {
      return Unavailable("cannot create " + dir + ": " + std::strerror(errno));
    }
  }
  for (const ReportFile& file : run.reports) {
    const std::string& report = file.path;
    const int fd = open(report.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return Unavailable("cannot create " + report + ": " + std::strerror(errno));
    const bool given =
        !run.place.who.switch_user || fchown(fd, run.place.who.uid, run.place.who.gid) == 0;
    close(fd);
    if (!given) return Unavailable("cannot give " + report + " to " + run.place.who.user);
  }
  return Status::Ok();
}

}  // namespace unipool::agent
