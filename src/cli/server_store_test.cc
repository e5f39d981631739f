// The server when its disk fills: a write that fails is undone everywhere
// (no phantom job, no reused id), the server goes read-only (writes 503,
// reads served, /readyz 503) and resumes by itself when space returns.
// The disk is a small tmpfs the test mounts where it may; elsewhere a file
// size limit (RLIMIT_FSIZE) on the server plays the full disk.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include "cli/cli_test_util.h"
#include "cli/server_test_util.h"

namespace unipool::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A job whose spec weighs about `kb` KiB (an environment value), so that a
// few dozen fill the small disk.
std::string BigJob(int kb) {
  return "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: big}\n"
         "spec:\n  command: [sleep, '600']\n  gpus: 1\n  queue: team-a\n"
         "  env: {PAD: '" +
         std::string(static_cast<size_t>(kb) * 1024, 'p') + "'}\n";
}

// The small disk: a tmpfs (when mounting is allowed) nearly filled by a
// filler file; Free() deletes the filler. Without mount rights, a file
// size limit on the server process: Free() lifts it.
class SmallDisk {
 public:
  explicit SmallDisk(const std::string& dir) : dir_(dir) {
    fs::create_directories(dir_);
    mounted_ = mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=16m") == 0;
  }
  ~SmallDisk() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
    fs::remove_all(dir_);
  }
  bool mounted() const { return mounted_; }

  // Leaves about `left` bytes free.
  void Fill(pid_t server, size_t left) {
    if (mounted_) {
      std::ofstream out(dir_ + "/filler", std::ios::binary);
      const std::string chunk(1 << 16, 'f');
      while (out.write(chunk.data(), chunk.size())) out.flush();
      out.close();
      const auto size = fs::file_size(dir_ + "/filler");
      fs::resize_file(dir_ + "/filler", size > left ? size - left : 0);
      return;
    }
    size_t biggest = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) {
      if (e.is_regular_file()) biggest = std::max<size_t>(biggest, e.file_size());
    }
    rlimit lim{biggest + left, RLIM_INFINITY};
    ASSERT_EQ(prlimit(server, RLIMIT_FSIZE, &lim, nullptr), 0);
  }
  void Free(pid_t server) {
    if (mounted_) {
      fs::remove(dir_ + "/filler");
      return;
    }
    rlimit lim{RLIM_INFINITY, RLIM_INFINITY};
    ASSERT_EQ(prlimit(server, RLIMIT_FSIZE, &lim, nullptr), 0);
  }

 private:
  std::string dir_;
  bool mounted_ = false;
};

TEST(ServerStoreTest, FullDiskIsReadOnlyLosesNothingAndResumes) {
  const std::string base =
      (fs::temp_directory_path() / ("unipool-disk-" + std::to_string(getpid()))).string();
  SmallDisk disk(base);
  std::printf("small disk: %s\n", disk.mounted() ? "tmpfs of 16 MiB" : "RLIMIT_FSIZE");
  TestServer s(TestServer::Options{.data_dir = base + "/data"});
  s.Start();

  std::set<int64_t> acknowledged;
  for (int i = 0; i < 3; ++i) {
    HttpReply r = s.Call("POST", "/v1/jobs", "tenant-a", BigJob(64), "application/yaml");
    ASSERT_EQ(r.status, 201) << r.body;
    acknowledged.insert(r.json()["id"].get<int64_t>());
  }
  disk.Fill(s.pid(), 256 << 10);

  // Submit until the disk refuses; every 201 must survive, every 503 must
  // leave nothing behind.
  int refused = 0;
  std::string why;
  for (int i = 0; i < 400 && refused == 0; ++i) {
    HttpReply r = s.Call("POST", "/v1/jobs", "tenant-a", BigJob(64), "application/yaml");
    if (r.status == 201) {
      acknowledged.insert(r.json()["id"].get<int64_t>());
    } else {
      ASSERT_EQ(r.status, 503) << r.body;
      why = r.body;
      ++refused;
    }
  }
  ASSERT_EQ(refused, 1) << "the disk never filled";
  EXPECT_EQ(JobIds(s), acknowledged) << "a refused submission is listed: " << why;

  // Read-only: writes refused with the cause, reads served, not ready.
  HttpReply w = s.Call("POST", "/v1/jobs", "tenant-a", BigJob(1), "application/yaml");
  EXPECT_EQ(w.status, 503) << w.body;
  EXPECT_NE(w.body.find("read-only"), std::string::npos) << w.body;
  HttpReply cordon = s.Call("POST", "/v1/nodes/dev-2/cordon", "admin", "{}");
  EXPECT_EQ(cordon.status, 503) << cordon.body;
  EXPECT_EQ(s.Call("GET", "/v1/nodes/dev-2", "admin").json()["admin"], "");
  EXPECT_EQ(s.Call("GET", "/readyz", "").status, 503);
  EXPECT_EQ(s.Call("GET", "/healthz", "").status, 200);
  EXPECT_EQ(JobIds(s), acknowledged);
  HttpReply metrics = s.Call("GET", "/metrics", "admin");
  EXPECT_NE(metrics.body.find("unipool_store_read_only 1"), std::string::npos);

  // Space returns: writes resume by themselves, with a fresh id.
  disk.Free(s.pid());
  bool ready = false;
  for (int i = 0; i < 100 && !ready; ++i) {
    ready = s.Call("GET", "/readyz", "").status == 200;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(ready) << "did not resume writes";
  HttpReply again = s.Call("POST", "/v1/jobs", "tenant-a", BigJob(1), "application/yaml");
  ASSERT_EQ(again.status, 201) << again.body;
  const int64_t id = again.json()["id"].get<int64_t>();
  EXPECT_GT(id, *acknowledged.rbegin());
  acknowledged.insert(id);
  EXPECT_EQ(s.Call("POST", "/v1/nodes/dev-2/cordon", "admin", "{}").status, 200);

  // And all of it is what a restart finds.
  s.Stop();
  s.Start();
  EXPECT_EQ(JobIds(s), acknowledged);
  EXPECT_EQ(s.Call("GET", "/v1/nodes/dev-2", "admin").json()["admin"], "cordoned");
  s.Stop();
}

}  // namespace
}  // namespace unipool::testing

namespace unipool::testing {
namespace {

// One SQL statement (or several) on a store file; fails the test on error.
void Sql(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "") << "\n" << sql;
  sqlite3_free(err);
  sqlite3_close(h);
}

// The last line of `text`.
std::string LastLine(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

struct Damage {
  std::string name;
  std::function<void(const std::string& dir)> apply;  // on a copy of a good data directory
  std::string error;  // the exact last line; {db} is the database's path
  bool init = false;  // start with --init
};

// A damaged store is refused with one exact line naming the file and the
// cause, and a non-zero exit; nothing is reinterpreted.
TEST(ServerStoreTest, DamagedStoresAreRefused) {
  // A good store: queues, a running job on GPUs of dev-0.
  TestServer good;
  good.Start();
  HttpReply r = good.Call("POST", "/v1/jobs", "tenant-a",
                          "apiVersion: unipool/v1\nkind: Job\nmetadata: {name: j}\n"
                          "spec: {command: [sleep, '600'], gpus: 8, queue: team-a}\n",
                          "application/yaml");
  ASSERT_EQ(r.status, 201) << r.body;
  for (int i = 0; i < 100 && good.Call("GET", "/v1/jobs/1", "admin").json()["state"] != "Running";
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  good.Stop();
  const std::string source = good.dir() + "/data";
  const std::string job1 = "/jobs/000000000001";

  const std::vector<Damage> cases = {
      {"missing", [](const std::string& d) { fs::remove(d + "/unipool.db"); },
       "error: no store at {db}; start with --init to create a new, empty cluster state"},
      {"zero bytes",
       [](const std::string& d) {
         fs::remove(d + "/unipool.db-wal");
         fs::remove(d + "/unipool.db-shm");
         fs::resize_file(d + "/unipool.db", 0);
       },
       "error: {db} is empty (no tables): not a unipool store; start with --init to create a "
       "new, empty cluster state there"},
      {"not SQLite",
       [](const std::string& d) {
         fs::remove(d + "/unipool.db-wal");
         fs::remove(d + "/unipool.db-shm");
         std::ofstream(d + "/unipool.db") << "this is not a database, but long enough to tell "
                                             "SQLite so: 0123456789012345678901234567890123456789"
                                             "012345678901234567890123456789\n";
       },
       "error: {db}: not a SQLite database (file is not a database)", true},
      {"foreign tables",
       [](const std::string& d) {
         Sql(d + "/unipool.db", "DROP TABLE kv; CREATE TABLE users (id INTEGER);");
       },
       "error: {db} is not a unipool store (its tables: meta,probe,users)", true},
      {"without its table", [](const std::string& d) { Sql(d + "/unipool.db", "DROP TABLE kv;"); },
       "error: {db} is not a unipool store (its tables: meta,probe)"},
      {"another schema",
       [](const std::string& d) {
         Sql(d + "/unipool.db", "DROP TABLE kv; CREATE TABLE kv (key TEXT, value BLOB);");
       },
       "error: {db} has another schema (kv: key,value; meta: name,value)"},
      {"format 99",
       [](const std::string& d) {
         Sql(d + "/unipool.db", "UPDATE meta SET value = 99 WHERE name = 'format';");
       },
       "error: {db}: store format 99 is not the one this unipool reads (1)"},
      {"revision lowered",
       [](const std::string& d) {
         Sql(d + "/unipool.db", "UPDATE meta SET value = 2 WHERE name = 'revision';");
       },
       ""},  // the record named depends on the store's history: checked below
      {"key and id disagree",
       [&](const std::string& d) {
         Sql(d + "/unipool.db",
             "UPDATE kv SET key = '/jobs/000000000007' WHERE key = '" + job1 + "';");
       },
       "error: store record /jobs/000000000007: holds job 1 (damaged store)"},
      {"GPU index out of range",
       [&](const std::string& d) {
         Sql(d + "/unipool.db",
             "UPDATE kv SET value = replace(CAST(value AS TEXT), '\"gpus\":[0,', "
             "'\"gpus\":[4000000000,') WHERE key = '" +
                 job1 + "';");
       },
       "error: store record /jobs/000000000001: job.tasks.gpus: 4000000000 is not a GPU index (0 "
       "to 65535)"},
      {"restarts a float",
       [&](const std::string& d) {
         Sql(d + "/unipool.db",
             "UPDATE kv SET value = replace(CAST(value AS TEXT), '\"restarts\":0', "
             "'\"restarts\":1e300') WHERE key = '" +
                 job1 + "';");
       },
       "error: store record /jobs/000000000001: job.restarts: expected a whole number"},
  };
  int n = 0;
  for (const Damage& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = good.dir() + "/damaged-" + std::to_string(n++);
    fs::copy(source, dir, fs::copy_options::recursive);
    fs::remove(dir + "/LOCK");
    c.apply(dir);
    std::vector<std::string> args = {"server",
                                     "--cluster",
                                     "examples/clusters/devbox.yaml",
                                     "--tokens",
                                     good.dir() + "/tokens.yaml",
                                     "--data",
                                     dir,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--log-level",
                                     "error"};
    if (c.init) args.push_back("--init");
    RunResult run = RunUnipool(args);
    EXPECT_NE(run.exit_code, 0);
    const std::string db = dir + "/unipool.db";
    if (c.error.empty()) {
      EXPECT_TRUE(LastLine(run.err).starts_with("error: " + db + ": record /")) << run.err;
      EXPECT_NE(run.err.find("do not fit the store's revision 2 (damaged store)"),
                std::string::npos)
          << run.err;
    } else {
      std::string want = c.error;
      if (const size_t at = want.find("{db}"); at != std::string::npos) want.replace(at, 4, db);
      EXPECT_EQ(LastLine(run.err), want) << run.err;
    }
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
}

}  // namespace
}  // namespace unipool::testing
