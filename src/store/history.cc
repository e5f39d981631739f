#include "store/history.h"

#include <sqlite3.h>

namespace unipool::store {
namespace {

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS unipool_history ("
    " id INTEGER PRIMARY KEY, finished INTEGER NOT NULL, queue TEXT NOT NULL,"
    " state TEXT NOT NULL, record TEXT NOT NULL, events TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS unipool_history_finished ON unipool_history (finished);";

// A prepared statement, finalized at scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) {
    ok_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) == SQLITE_OK;
  }
  ~Stmt() { sqlite3_finalize(s_); }
  bool ok() const { return ok_; }
  sqlite3_stmt* get() { return s_; }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  bool ok_ = false;
};

std::string Text(sqlite3_stmt* s, int col) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, col));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s, col))) : std::string();
}

}  // namespace

Result<std::unique_ptr<History>> History::Open(const std::string& path) {
  std::unique_ptr<History> h(new History(path));
  UNIPOOL_RETURN_IF_ERROR(h->Init());
  return h;
}

History::~History() {
  if (db_) sqlite3_close(db_);
}

Status History::Error(const std::string& what) const {
  return Unavailable("history " + path_ + ": " + what + ": " + sqlite3_errmsg(db_));
}

Status History::Init() {
  if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    return Error("cannot open");
  }
  sqlite3_busy_timeout(db_, 5000);
  char* err = nullptr;
  const std::string sql =
      std::string("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;") + kSchema;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown";
    sqlite3_free(err);
    return InvalidArgument("history " + path_ + ": not a unipool history file (" + msg + ")");
  }
  Stmt check(db_, "SELECT id, finished, queue, state, record, events FROM unipool_history LIMIT 0");
  if (!check.ok()) {
    return InvalidArgument("history " + path_ + ": not a unipool history file (" +
                           sqlite3_errmsg(db_) + ")");
  }
  return Status::Ok();
}

Status History::Put(const std::vector<ArchivedJob>& jobs) {
  std::lock_guard lock(mu_);
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Error("cannot begin a write");
  }
  Stmt put(db_,
           "INSERT INTO unipool_history (id, finished, queue, state, record, events)"
           " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET finished = excluded.finished,"
           " queue = excluded.queue, state = excluded.state, record = excluded.record,"
           " events = excluded.events WHERE length(excluded.events) > length(events)");
  bool ok = put.ok();
  for (size_t i = 0; ok && i < jobs.size(); ++i) {
    const ArchivedJob& j = jobs[i];
    sqlite3_reset(put.get());
    put.Bind(1, j.id);
    put.Bind(2, j.finished);
    put.Bind(3, j.queue);
    put.Bind(4, j.state);
    put.Bind(5, j.record);
    put.Bind(6, j.events);
    ok = sqlite3_step(put.get()) == SQLITE_DONE;
  }
  if (!ok || sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    Status st = Error("cannot archive");
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return st;
  }
  return Status::Ok();
}

ArchivedJob History::Row(sqlite3_stmt* s) {
  ArchivedJob j;
  j.id = sqlite3_column_int64(s, 0);
  j.finished = sqlite3_column_int64(s, 1);
  j.queue = Text(s, 2);
  j.state = Text(s, 3);
  j.record = Text(s, 4);
  j.events = Text(s, 5);
  return j;
}

Result<std::optional<ArchivedJob>> History::Get(int64_t id) const {
  std::lock_guard lock(mu_);
  Stmt get(db_,
           "SELECT id, finished, queue, state, record, events FROM unipool_history WHERE id = ?");
  if (!get.ok()) return Error("cannot read");
  get.Bind(1, id);
  const int rc = sqlite3_step(get.get());
  if (rc == SQLITE_DONE) return std::optional<ArchivedJob>();
  if (rc != SQLITE_ROW) return Error("cannot read");
  return std::optional<ArchivedJob>(Row(get.get()));
}

Result<std::vector<ArchivedJob>> History::List(const HistoryQuery& q) const {
  std::lock_guard lock(mu_);
  Stmt list(db_,
            "SELECT id, finished, queue, state, record, events FROM unipool_history"
            " WHERE id < ? AND finished >= ? AND (? = '' OR queue = ?) AND (? = '' OR state = ?)"
            " ORDER BY id DESC LIMIT ?");
  if (!list.ok()) return Error("cannot read");
  list.Bind(1, q.before > 0 ? q.before : INT64_MAX);
  list.Bind(2, q.finished_since);
  list.Bind(3, q.queue);
  list.Bind(4, q.queue);
  list.Bind(5, q.state);
  list.Bind(6, q.state);
  list.Bind(7, int64_t{q.limit});
  std::vector<ArchivedJob> out;
  int rc;
  while ((rc = sqlite3_step(list.get())) == SQLITE_ROW) out.push_back(Row(list.get()));
  if (rc != SQLITE_DONE) return Error("cannot read");
  return out;
}

Result<int64_t> History::Count() const {
  std::lock_guard lock(mu_);
  Stmt count(db_, "SELECT COUNT(*) FROM unipool_history");
  if (!count.ok() || sqlite3_step(count.get()) != SQLITE_ROW) return Error("cannot read");
  return sqlite3_column_int64(count.get(), 0);
}

}  // namespace unipool::store
