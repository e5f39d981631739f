#include "store/etcd_maintenance.h"

#include <algorithm>

namespace unipool::store {

using Json = EtcdClient::Json;

EtcdMaintenance::EtcdMaintenance(const EtcdOptions& options, MaintenanceOptions m)
    : client_(options), options_(m) {}

Status EtcdMaintenance::Compact(int64_t revision) {
  // physical: the call returns once the old revisions are gone from the
  // file, so the status read next counts the space as free.
  Result<Json> r = client_.Call("kv/compaction", {{"revision", revision}, {"physical", true}});
  if (!r.ok() && r.status().message().find("compacted") == std::string::npos) {
    return r.status();  // (already compacted past it, by an operator: fine)
  }
  return Status::Ok();
}

MemberStatus EtcdMaintenance::Member(size_t endpoint) {
  MemberStatus m;
  m.endpoint = client_.endpoints()[endpoint];
  Result<Json> r = client_.CallAt(endpoint, "maintenance/status", Json::object(),
                                  std::chrono::milliseconds(5000));
  if (!r.ok()) {
    m.error = r.status().message();
    return m;
  }
  m.ok = true;
  m.db_size = EtcdClient::Int(*r, "dbSize");
  m.db_size_in_use = EtcdClient::Int(*r, "dbSizeInUse");
  return m;
}

bool EtcdMaintenance::NeedsDefrag(const MemberStatus& m) const {
  return m.ok && m.db_size - m.db_size_in_use > options_.defrag_min_bytes &&
         static_cast<double>(m.db_size) > options_.defrag_ratio * m.db_size_in_use;
}

MaintenanceRound EtcdMaintenance::RunOnce() {
  MaintenanceRound round;
  auto fail = [&round](const Status& s) {
    if (round.status.ok()) round.status = s;
  };
  // Phase 1: compaction, to what the previous round saw.
  Result<Json> head =
      client_.Call("kv/range", {{"key", EtcdClient::Base64("\x01")}, {"limit", 1}});
  if (head.ok()) {
    round.revision = EtcdClient::Int(head->value("header", Json::object()), "revision");
    if (previous_ > compacted_) {
      if (Status st = Compact(previous_); st.ok()) {
        round.compacted_to = compacted_ = previous_;
      } else {
        fail(st);
      }
    }
    previous_ = round.revision;
  } else {
    fail(head.status());  // no quorum: the members' sizes are still worth reading
  }
  // Phase 2: every member's file.
  for (size_t e = 0; e < client_.endpoints().size(); ++e) {
    round.members.push_back(Member(e));
    if (!round.members.back().ok) fail(Unavailable(round.members.back().error));
  }
  // Phase 3: the member with the most free space, if it needs it.
  auto worst = std::max_element(
      round.members.begin(), round.members.end(), [](const MemberStatus& a, const MemberStatus& b) {
        return a.db_size - a.db_size_in_use < b.db_size - b.db_size_in_use;
      });
  if (head.ok() && worst != round.members.end() && NeedsDefrag(*worst)) {
    const size_t e = static_cast<size_t>(worst - round.members.begin());
    Result<Json> r =
        client_.CallAt(e, "maintenance/defragment", Json::object(), options_.defrag_timeout);
    if (r.ok()) {
      round.defragmented = worst->endpoint;
      *worst = Member(e);  // its size after
    } else {
      fail(r.status());
    }
  }
  return round;
}

}  // namespace unipool::store
