#include "agent/launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "agent/log_file.h"
#include "agent/steady_clock.h"

namespace unipool::agent {
namespace {

// Copies `fd` to the log at `path` until EOF.
void CopyLines(int fd, const std::string& path, LogLimits limits) {
  LogFile log(path, limits);
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    log.Write(buf, static_cast<size_t>(n));
  }
  close(fd);
}

// In the child: drops to `as` for good, or exits 126 saying why.
void BecomeUser(const Identity& as) {
  if (setgroups(as.groups.size(), as.groups.data()) != 0 || setgid(as.gid) != 0 ||
      setuid(as.uid) != 0 || (as.uid != 0 && (setuid(0) == 0 || getuid() != as.uid))) {
    std::fprintf(stderr, "unipool agent: cannot become user %s (uid %u): %s\n", as.user.c_str(),
                 static_cast<unsigned>(as.uid), std::strerror(errno));
    _exit(126);
  }
  if (as.uid != 0) prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

const char* SignalName(int sig) {
  switch (sig) {
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGINT:
      return "SIGINT";
    default:
      return "a signal";
  }
}

}  // namespace

std::string ExitInfo::Describe() const {
  std::string s = "rank " + std::to_string(rank) + ": ";
  if (exit_code >= 0) {
    s += "exit code " + std::to_string(exit_code);
    if (exit_code == 137) s += " (killed, often out of memory)";
    return s;
  }
  s += std::string("killed by ") + SignalName(signal) + " (" + std::to_string(signal) + ")";
  if (signal == SIGKILL && !stopped_by_us) s += ", often the kernel's out-of-memory killer";
  if (signal == SIGSEGV || signal == SIGBUS) s += ", a crash in native code";
  return s;
}

bool PeerLost(const std::string& tail) {
  for (const char* needle : {"Connection closed by peer", "Connection reset by peer",
                             "ncclRemoteError", "remote process exited", "Socket Timeout"}) {
    if (tail.find(needle) != std::string::npos) return true;
  }
  return false;
}

namespace {

// The line of `tail` around `at`, cut to 200 bytes: the evidence a hint
// quotes.
std::string LineAt(const std::string& tail, size_t at) {
  const size_t nl = tail.rfind('\n', at);
  const size_t begin = nl == std::string::npos ? 0 : nl + 1;
  std::string line(WithoutTimestamp(tail.substr(begin, tail.find('\n', at) - begin)));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line.size() > 200 ? line.substr(0, 200) + "..." : line;
}

// A cause, the log text that shows it (any of `needles`: each a set of
// strings that all occur, the first one quoted), and its fix.
struct LogPattern {
  const char* cause;
  const char* hint;
  const char* fix;
  std::vector<std::vector<const char*>> needles;
};

const std::vector<LogPattern>& Patterns() {
  static const std::vector<LogPattern> patterns = {
      {"CommTimeout",
       "communication timeout (NCCL)",
       "a peer stopped or the network failed; check the other ranks' logs and the nodes' NICs",
       {{"Watchdog caught collective operation timeout"}, {"NCCL", "imeout"}}},
      {"CommTimeout",
       "communication timeout (gloo)",
       "a peer stopped or the network failed; check the other ranks' logs and the nodes' NICs",
       {{"Timed out waiting", "gloo"}, {"gloo", "Timed out"}}},
      {"GpuOutOfMemory",
       "GPU out of memory",
       "lower the micro-batch size, or use activation checkpointing or more tensor/pipeline "
       "parallelism",
       {{"CUDA out of memory"}, {"OutOfMemoryError"}}},
      {"HostOutOfMemory",
       "host out of memory",
       "fewer data-loader workers or a smaller prefetch",
       {{"MemoryError"}, {"Cannot allocate memory"}}},
      {"NaNLoss",
       "NaN loss",
       "lower the learning rate, check the data, or resume from an earlier checkpoint",
       {{"loss is nan"}, {"loss=nan"}, {"\"loss\": NaN"}, {"NaN loss"}}},
      {"PortInUse",
       "the rendezvous port was taken",
       "the next restart uses another",
       {{"Address already in use"}}},
      {"Missing",
       "a missing command or file",
       "the command or a file it needs is missing on the node",
       {{"No such file or directory"}, {"command not found"}}},
  };
  return patterns;
}

}  // namespace

std::string_view WithoutTimestamp(std::string_view line) {
  const size_t space = line.find(' ');
  const bool stamped = !line.empty() && std::isdigit(static_cast<unsigned char>(line[0])) &&
                       space != std::string_view::npos && space < 40 && line[space - 1] == 'Z';
  return stamped ? line.substr(space + 1) : line;
}

LogHint DiagnoseLog(const std::string& tail) {
  for (const LogPattern& p : Patterns()) {
    for (const std::vector<const char*>& all : p.needles) {
      if (std::all_of(all.begin(), all.end(),
                      [&](const char* n) { return tail.find(n) != std::string::npos; })) {
        return {p.cause, std::string(p.hint) + ": " + p.fix + " (log: \"" +
                             LineAt(tail, tail.find(all[0])) + "\")"};
      }
    }
  }
  return {};
}

ProcessGroup::~ProcessGroup() {
  if (!pids_.empty()) Kill();
}

Status ProcessGroup::Start(const std::vector<ProcessSpec>& procs) {
  for (const ProcessSpec& p : procs) {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(p.log_path).parent_path(), ec);
    if (ec) {
      Kill();
      return Unavailable("cannot create the log directory of " + p.log_path + ": " + ec.message());
    }
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
      Kill();
      return Unavailable(std::string("pipe: ") + std::strerror(errno));
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      close(pipefd[0]);
      close(pipefd[1]);
      Kill();
      return Unavailable(std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      // The agent blocks SIGTERM and SIGINT for its signal thread; a job
      // must get them (preemption), so its mask and handlers start clean.
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      signal(SIGTERM, SIG_DFL);
      signal(SIGINT, SIG_DFL);
      signal(SIGPIPE, SIG_DFL);
      if (!p.cgroup_procs.empty()) {  // before exec: everything it starts is inside
        const int cg = open(p.cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
        if (cg >= 0) {
          [[maybe_unused]] const ssize_t n = write(cg, "0", 1);  // else the tag finds it
          close(cg);
        }
      }
      setsid();
      if (p.as.switch_user) BecomeUser(p.as);  // (after the cgroup: root may write it)
      prctl(PR_SET_PDEATHSIG, SIGKILL);        // (after the user: a change of it clears this)
      if (getppid() != parent) _exit(127);     // the agent died before prctl
      dup2(pipefd[1], STDOUT_FILENO);
      dup2(pipefd[1], STDERR_FILENO);
      const int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, STDIN_FILENO);
      // Nothing else of the agent's: other runs' logs, its sockets.
      close_range(3, ~0U, 0);
      clearenv();  // nothing of the agent's environment (its tokens) reaches a job
      for (const auto& [k, v] : p.env) setenv(k.c_str(), v.c_str(), 1);
      for (const std::string& dir : p.make_dirs) {
        if (const std::string err = MakePrivateDirs(dir); !err.empty()) {
          std::fprintf(stderr, "unipool agent: cannot create %s as %s\n", err.c_str(),
                       p.as.user.c_str());
          _exit(126);
        }
      }
      if (!p.working_dir.empty() && chdir(p.working_dir.c_str()) != 0) {
        std::fprintf(stderr, "unipool agent: cannot enter working directory %s: %s\n",
                     p.working_dir.c_str(), std::strerror(errno));
        _exit(126);
      }
      std::vector<char*> argv;
      for (const std::string& a : p.argv) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      std::fprintf(stderr, "unipool agent: cannot run %s: %s (command not found?)\n", argv[0],
                   std::strerror(errno));
      _exit(127);
    }
    close(pipefd[1]);
    // Detached: a process that leaves its group (a daemon started with
    // setsid) keeps the pipe open after the run ends; nothing waits for it.
    std::thread(CopyLines, pipefd[0], p.log_path, p.log_limits).detach();
    pids_.push_back(Proc{pid, p.rank, p.log_path});
    logs_.push_back(p.log_path);
  }
  return Status::Ok();
}

bool ProcessGroup::Poll() {
  if (stop_deadline_ > 0 && SteadyMs() >= stop_deadline_) {
    for (const Proc& p : pids_) {
      kill(-p.pid, SIGKILL);
      kill(p.pid, SIGKILL);  // (as in Stop)
    }
  }
  for (auto it = pids_.begin(); it != pids_.end();) {
    int status = 0;
    const pid_t r = waitpid(it->pid, &status, WNOHANG);
    if (r == 0) {
      ++it;
      continue;
    }
    ExitInfo e;
    e.rank = it->rank;
    e.log_path = it->log_path;
    e.stopped_by_us = stop_deadline_ > 0;
    if (r > 0 && WIFEXITED(status)) e.exit_code = WEXITSTATUS(status);
    if (r > 0 && WIFSIGNALED(status)) e.signal = WTERMSIG(status);
    kill(-it->pid, SIGKILL);  // anything it left behind in its group
    exits_.push_back(e);
    it = pids_.erase(it);
  }
  return pids_.empty();
}

void ProcessGroup::Stop(int grace_s) {
  if (stop_deadline_ > 0) return;
  stop_deadline_ = SteadyMs() + int64_t{grace_s} * 1000;
  for (const Proc& p : pids_) {
    kill(-p.pid, SIGTERM);
    // Also the process itself: one just forked has no session of its own
    // yet (setsid), and its group's signal would be lost.
    kill(p.pid, SIGTERM);
  }
}

void ProcessGroup::Kill() {
  if (stop_deadline_ == 0) stop_deadline_ = SteadyMs();
  for (const Proc& p : pids_) {
    kill(-p.pid, SIGKILL);
    kill(p.pid, SIGKILL);  // (as in Stop)
  }
  // A process in uninterruptible sleep (a GPU that fell off the bus) may
  // never die: give up after 10 s rather than wedge the agent.
  for (const int64_t end = SteadyMs() + 10000; !Poll() && SteadyMs() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool ProcessGroup::all_ok() const {
  return !exits_.empty() &&
         std::all_of(exits_.begin(), exits_.end(), [](const ExitInfo& e) { return e.ok(); });
}

std::vector<pid_t> ProcessGroup::pids() const {
  std::vector<pid_t> out;
  for (const Proc& p : pids_) out.push_back(p.pid);
  return out;
}

std::vector<std::pair<int, std::string>> ProcessGroup::LastLines() const {
  std::vector<std::pair<int, std::string>> out;
  for (const Proc& p : pids_) {
    std::string tail = TailLog(p.log_path, 4096);
    while (!tail.empty() && tail.back() == '\n') tail.pop_back();
    const size_t nl = tail.rfind('\n');
    std::string line = nl == std::string::npos ? tail : tail.substr(nl + 1);
    out.emplace_back(p.rank, std::string(WithoutTimestamp(line)));
  }
  return out;
}

std::string ProcessGroup::LogTails(size_t bytes) const {
  std::string out;
  for (const std::string& path : logs_) out += TailLog(path, bytes);
  return out;
}

}  // namespace unipool::agent
