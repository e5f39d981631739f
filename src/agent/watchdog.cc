#include "agent/watchdog.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "agent/containment.h"
#include "agent/steady_clock.h"

namespace unipool::agent {
namespace {

static_assert(std::atomic<int64_t>::is_always_lock_free, "shared between processes");

// The fixed descriptors the watchdog finds its page and pipe on.
constexpr int kStateFd = 3;
constexpr int kPipeFd = 4;

Watchdog::State* MapState(int fd) {
  void* p = mmap(nullptr, sizeof(Watchdog::State), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<Watchdog::State*>(p);
}

// Returns how many processes the tag scan found.
int KillEverything(const std::string& cgroup_base, const std::string& tag) {
  KillCgroupTree(cgroup_base, false);
  return KillTagged(tag + "/");
}

}  // namespace

Result<std::unique_ptr<Watchdog>> Watchdog::Start(const std::string& exe,
                                                  const Containment& containment) {
  std::unique_ptr<Watchdog> w(new Watchdog());
  w->exe_ = exe;
  w->cgroup_base_ = containment.cgroup_base();
  w->tag_ = containment.tag();
  w->memfd_ = memfd_create("unipool-watchdog", MFD_CLOEXEC);
  if (w->memfd_ < 0 || ftruncate(w->memfd_, sizeof(State)) != 0) {
    return Unavailable(std::string("watchdog: memfd: ") + std::strerror(errno));
  }
  w->state_ = MapState(w->memfd_);
  if (!w->state_) return Unavailable(std::string("watchdog: mmap: ") + std::strerror(errno));
  new (w->state_) State();
  UNIPOOL_RETURN_IF_ERROR(w->Spawn());
  return w;
}

Status Watchdog::Spawn() {
  int fds[2];
  // Close-on-exec: a task that inherited the write end would keep the pipe
  // open after the agent died, and the watchdog would never know.
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return Unavailable(std::string("watchdog: pipe: ") + std::strerror(errno));
  }
  const std::vector<std::string> args = {exe_,         "agent-watchdog", "--cgroup",
                                         cgroup_base_, "--tag",          tag_};
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return Unavailable(std::string("watchdog: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {   // async-signal-safe calls only until exec
    setpgid(0, 0);  // signals to the agent's process group do not reach it
    const int state = fcntl(memfd_, F_DUPFD, 10);
    const int in = fcntl(fds[0], F_DUPFD, 10);
    if (state < 0 || in < 0 || dup2(state, kStateFd) < 0 || dup2(in, kPipeFd) < 0) _exit(127);
    close_range(kPipeFd + 1, ~0U, 0);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[0]);
  if (pipe_write_ >= 0) close(pipe_write_);
  pipe_write_ = fds[1];
  pid_ = pid;
  return Status::Ok();
}

Watchdog::~Watchdog() {
  if (pipe_write_ >= 0) close(pipe_write_);
  if (pid_ > 0) waitpid(pid_, nullptr, 0);
  if (state_) munmap(state_, sizeof(State));
  if (memfd_ >= 0) close(memfd_);
}

void Watchdog::SetDeadline(int64_t steady_ms) { state_->deadline_ms = steady_ms; }

int64_t Watchdog::fences() const { return state_->fences.load(); }

bool Watchdog::EnsureRunning() {
  if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0) return true;
  pid_ = -1;
  return Spawn().ok();
}

int RunWatchdog(int state_fd, int pipe_fd, const std::string& cgroup_base, const std::string& tag) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) signal(sig, SIG_IGN);
  Watchdog::State* state = MapState(state_fd);
  if (!state) {
    std::fprintf(stderr, "unipool agent-watchdog: cannot map the agent's page: %s\n",
                 std::strerror(errno));
    return 1;
  }
  bool fenced = false;
  int64_t last_scan = 0;
  while (true) {
    pollfd p{pipe_fd, POLLIN, 0};
    if (poll(&p, 1, 50) > 0) {
      char c;
      if (read(pipe_fd, &c, 1) <= 0) break;  // the agent is gone
    }
    const int64_t now = SteadyMs();
    state->tick_ms = now;
    const int64_t deadline = state->deadline_ms.load();
    if (deadline <= 0 || now <= deadline) {
      fenced = false;
      continue;
    }
    // Past the deadline. The fence is counted before the first kill: the
    // agent, seeing a task die, must already know the fence killed it (else
    // it reports the job's failure, not a disruption).
    if (!fenced) {
      fenced = true;
      ++state->fences;
      std::fprintf(stderr,
                   "unipool agent-watchdog: the agent has not renewed its lease for %lld ms past "
                   "the fence deadline: killing every task\n",
                   static_cast<long long>(now - deadline));
    }
    // The cgroups at every tick (cheap), the /proc scan five times a second.
    KillCgroupTree(cgroup_base, false);
    if (now - last_scan >= 200) {
      KillTagged(tag + "/");
      last_scan = now;
    }
  }
  // The agent died: nothing else will stop its tasks. Again until two
  // passes find nothing (a task may be forking).
  for (int i = 0, quiet = 0; i < 40 && quiet < 2; ++i) {
    quiet = KillEverything(cgroup_base, tag) == 0 ? quiet + 1 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return 0;
}

}  // namespace unipool::agent
