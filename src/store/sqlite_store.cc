// The embedded Store: SQLite in WAL mode, synchronous=FULL, under a data
// directory. Every key is also held in memory (KvCache) for reads and
// watches; SQLite is written by one committer thread that takes all the
// transactions applied since its last flush and writes them in one SQLite
// transaction (group commit): one fsync acknowledges many writers.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "store/kv_cache.h"

namespace unipool::store {
namespace {

// The store format this unipool reads and writes (meta 'format').
constexpr int64_t kFormat = 1;

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value BLOB NOT NULL,"
    " create_revision INTEGER NOT NULL, mod_revision INTEGER NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);"
    "INSERT OR IGNORE INTO meta VALUES ('revision', 0);"
    "INSERT OR IGNORE INTO meta VALUES ('format', 1);"
    "CREATE TABLE IF NOT EXISTS probe (b BLOB);";

class Db {
 public:
  ~Db() {
    for (sqlite3_stmt* s : {put_, del_, rev_}) sqlite3_finalize(s);
    if (db_) sqlite3_close(db_);
  }
  // Opens an existing store; with `create`, makes a new one where there is
  // none (no file, or a file without tables). Refuses a foreign database,
  // another schema and an unknown format.
  Status Open(const std::string& path, bool create);
  // Every record, range-checked against the revision.
  Result<std::pair<KvMap, int64_t>> Load();
  Status Write(const std::vector<std::pair<int64_t, Txn>>& batch);
  Status Probe();

 private:
  Status CheckSchema(const std::string& path, bool create);
  // The names of `table`'s columns, in order ("" when it has none).
  std::string Columns(const char* table);
  Result<int64_t> Meta(const char* name);
  Status Error(const std::string& what) const {
    return Unavailable("sqlite: " + what + ": " + sqlite3_errmsg(db_));
  }
  Status Exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      return Unavailable(std::string("sqlite: ") + msg);
    }
    return Status::Ok();
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* put_ = nullptr;
  sqlite3_stmt* del_ = nullptr;
  sqlite3_stmt* rev_ = nullptr;
};

std::string Db::Columns(const char* table) {
  std::string out;
  sqlite3_stmt* s = nullptr;
  const std::string sql = std::string("PRAGMA table_info(") + table + ")";
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) return out;
  while (sqlite3_step(s) == SQLITE_ROW) {
    out += (out.empty() ? "" : ",") +
           std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 1)));
  }
  sqlite3_finalize(s);
  return out;
}

Result<int64_t> Db::Meta(const char* name) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT value FROM meta WHERE name = ?1", -1, &s, nullptr) !=
      SQLITE_OK) {
    return Error(std::string("read meta ") + name);
  }
  sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
  const int rc = sqlite3_step(s);
  const bool integer = rc == SQLITE_ROW && sqlite3_column_type(s, 0) == SQLITE_INTEGER;
  const int64_t v = integer ? sqlite3_column_int64(s, 0) : 0;
  sqlite3_finalize(s);
  if (!integer) return FailedPrecondition(std::string("meta '") + name + "' is missing");
  return v;
}

Status Db::CheckSchema(const std::string& path, bool create) {
  // The tables there are, ours or not.
  std::string tables;
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
                         -1, &s, nullptr) != SQLITE_OK) {
    return Unavailable(path + ": not a SQLite database (" + sqlite3_errmsg(db_) + ")");
  }
  while (sqlite3_step(s) == SQLITE_ROW) {
    tables += (tables.empty() ? "" : ",") +
              std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
  }
  sqlite3_finalize(s);
  if (tables.empty()) {
    if (!create) {
      return FailedPrecondition(path +
                                " is empty (no tables): not a unipool store; start with --init "
                                "to create a new, empty cluster state there");
    }
    return Exec(kSchema);
  }
  if (tables != "kv,meta" && tables != "kv,meta,probe") {
    return FailedPrecondition(path + " is not a unipool store (its tables: " + tables + ")");
  }
  if (Columns("kv") != "key,value,create_revision,mod_revision" ||
      Columns("meta") != "name,value") {
    return FailedPrecondition(path + " has another schema (kv: " + Columns("kv") +
                              "; meta: " + Columns("meta") + ")");
  }
  Result<int64_t> format = Meta("format");
  if (!format.ok()) return FailedPrecondition(path + ": " + format.status().message());
  if (*format != kFormat) {
    return FailedPrecondition(path + ": store format " + std::to_string(*format) +
                              " is not the one this unipool reads (" + std::to_string(kFormat) +
                              ")");
  }
  return Exec("CREATE TABLE IF NOT EXISTS probe (b BLOB);");
}

Status Db::Open(const std::string& path, bool create) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 && !create) {
    return FailedPrecondition("no store at " + path +
                              "; start with --init to create a new, empty cluster state");
  }
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    return Unavailable("cannot open " + path + ": " + (db_ ? sqlite3_errmsg(db_) : "no memory"));
  }
  sqlite3_busy_timeout(db_, 5000);
  UNIPOOL_RETURN_IF_ERROR(CheckSchema(path, create));
  UNIPOOL_RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"));
  if (sqlite3_prepare_v2(db_,
                         "INSERT INTO kv VALUES (?1, ?2, ?3, ?4) ON CONFLICT(key) DO UPDATE"
                         " SET value = ?2, mod_revision = ?4",
                         -1, &put_, nullptr) ||
      sqlite3_prepare_v2(db_, "DELETE FROM kv WHERE key = ?1", -1, &del_, nullptr) ||
      sqlite3_prepare_v2(db_, "UPDATE meta SET value = ?1 WHERE name = 'revision'", -1, &rev_,
                         nullptr)) {
    return Error("prepare " + path);
  }
  return Status::Ok();
}

Result<std::pair<KvMap, int64_t>> Db::Load() {
  KvMap kvs;
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT key, value, create_revision, mod_revision FROM kv", -1, &s,
                         nullptr) != SQLITE_OK) {
    return Error("read keys");
  }
  int rc = SQLITE_ROW;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    KeyValue kv;
    if (sqlite3_column_type(s, 0) != SQLITE_TEXT || sqlite3_column_type(s, 2) != SQLITE_INTEGER ||
        sqlite3_column_type(s, 3) != SQLITE_INTEGER) {
      sqlite3_finalize(s);
      return FailedPrecondition("a record has a key or revisions of the wrong type");
    }
    kv.key = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    kv.value.assign(static_cast<const char*>(sqlite3_column_blob(s, 1)),
                    sqlite3_column_bytes(s, 1));
    kv.create_revision = sqlite3_column_int64(s, 2);
    kv.mod_revision = sqlite3_column_int64(s, 3);
    std::string key = kv.key;
    kvs.insert_or_assign(std::move(key), std::move(kv));
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return Error("read keys");  // never start from half a store
  int64_t revision = 0;
  if (sqlite3_prepare_v2(db_, "SELECT value FROM meta WHERE name = 'revision'", -1, &s, nullptr) !=
      SQLITE_OK) {
    return Error("read revision");
  }
  rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) revision = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  if (rc != SQLITE_ROW) return Error("read revision");
  for (const auto& [key, kv] : kvs) {
    const bool ok = !kv.key.empty() && kv.key[0] == '/' && kv.create_revision >= 1 &&
                    kv.create_revision <= kv.mod_revision && kv.mod_revision <= revision;
    if (!ok) {
      return FailedPrecondition(
          "record " + kv.key.substr(0, 200) + ": revisions " + std::to_string(kv.create_revision) +
          "/" + std::to_string(kv.mod_revision) + " do not fit the store's revision " +
          std::to_string(revision) + " (damaged store)");
    }
  }
  return std::make_pair(std::move(kvs), revision);
}

Status Db::Write(const std::vector<std::pair<int64_t, Txn>>& batch) {
  UNIPOOL_RETURN_IF_ERROR(Exec("BEGIN"));
  for (const auto& [rev, txn] : batch) {
    for (const Op& op : txn.ops) {
      sqlite3_stmt* s = op.type == Op::Type::kPut ? put_ : del_;
      sqlite3_bind_text(s, 1, op.key.data(), static_cast<int>(op.key.size()), SQLITE_STATIC);
      if (op.type == Op::Type::kPut) {
        sqlite3_bind_blob(s, 2, op.value.data(), static_cast<int>(op.value.size()), SQLITE_STATIC);
        sqlite3_bind_int64(s, 3, rev);
        sqlite3_bind_int64(s, 4, rev);
      }
      const int rc = sqlite3_step(s);
      sqlite3_reset(s);
      if (rc != SQLITE_DONE) {
        Status st = Error("write " + op.key);
        (void)Exec("ROLLBACK");
        return st;
      }
    }
  }
  sqlite3_bind_int64(rev_, 1, batch.back().first);
  const int rc = sqlite3_step(rev_);
  sqlite3_reset(rev_);
  if (rc != SQLITE_DONE) {
    Status st = Error("write revision");
    (void)Exec("ROLLBACK");
    return st;
  }
  Status st = Exec("COMMIT");
  if (!st.ok()) (void)Exec("ROLLBACK");
  return st;
}

// A small real write (a page or so, then gone): succeeds once the disk
// takes writes again.
Status Db::Probe() {
  Status st = Exec("BEGIN; INSERT INTO probe VALUES (zeroblob(16384)); DELETE FROM probe; COMMIT;");
  if (!st.ok()) (void)Exec("ROLLBACK");
  return st;
}

class SqliteStore final : public CachedStore {
 public:
  explicit SqliteStore(size_t history) : CachedStore(history) {}
  ~SqliteStore() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (committer_.joinable()) committer_.join();
    cache_.Close();
    if (lock_fd_ >= 0) close(lock_fd_);  // releases the lock
  }

  Status Open(const std::string& dir, bool create) {
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return Unavailable("cannot create data directory " + dir + ": " + std::strerror(errno));
    }
    // One server per data directory: a second would hand out the same ids.
    lock_fd_ = open((dir + "/LOCK").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd_ < 0 || flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
      return Unavailable("data directory " + dir + " is in use by another unipool server");
    }
    const std::string path = dir + "/unipool.db";
    UNIPOOL_RETURN_IF_ERROR(db_.Open(path, create));
    auto loaded = db_.Load();
    if (!loaded.ok()) {
      const Status& st = loaded.status();
      return st.message().starts_with(path) ? st : Status(st.code(), path + ": " + st.message());
    }
    cache_.Load(std::move(loaded->first), loaded->second);
    committer_ = std::thread([this] { CommitLoop(); });
    return Status::Ok();
  }

  Result<int64_t> Apply(const Txn& txn) override {
    std::lock_guard lock(mu_);  // keeps `pending_` in revision order
    Result<int64_t> rev = cache_.Apply(txn, [&](int64_t r) { pending_.emplace_back(r, txn); });
    if (rev.ok()) wake_.notify_one();
    return rev;
  }

 private:
  void CommitLoop() {
    using Batch = std::vector<std::pair<int64_t, Txn>>;
    RunCommitter<Batch>(
        mu_, wake_, stop_, pending_, cache_,
        [this](const Batch& batch) {
          UNIPOOL_RETURN_IF_ERROR(db_.Write(batch));
          cache_.MarkDurable(batch.back().first);
          return Status::Ok();
        },
        [this] { return WaitUntilWritable(); });
  }

  // Probes once a second until a write works (true) or the store stops.
  bool WaitUntilWritable() {
    while (true) {
      {
        std::unique_lock lock(mu_);
        if (wake_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; })) return false;
      }
      if (db_.Probe().ok()) {
        cache_.SetWritable();
        return true;
      }
    }
  }

  Db db_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::pair<int64_t, Txn>> pending_;
  bool stop_ = false;
  std::thread committer_;
  int lock_fd_ = -1;
};

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& dir, bool create,
                                               size_t history) {
  auto s = std::make_unique<SqliteStore>(history);
  UNIPOOL_RETURN_IF_ERROR(s->Open(dir, create));
  return std::unique_ptr<Store>(std::move(s));
}

}  // namespace unipool::store
