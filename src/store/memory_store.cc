// The in-memory Store: a KvCache whose every revision is durable at once.
#include "store/kv_cache.h"

namespace unipool::store {
namespace {

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(size_t history) : cache_(history) {}

  Result<int64_t> Apply(const Txn& txn) override {
    Result<int64_t> rev = cache_.Apply(txn, [](int64_t) {});
    if (rev.ok()) cache_.MarkDurable(*rev);
    return rev;
  }
  Status Sync(int64_t revision) override { return cache_.WaitDurable(revision); }
  std::optional<KeyValue> Get(std::string_view key) const override { return cache_.Get(key); }
  std::vector<KeyValue> Range(std::string_view prefix, std::string_view start_after,
                              size_t limit) const override {
    return cache_.Range(prefix, start_after, limit);
  }
  int64_t revision() const override { return cache_.revision(); }
  Result<std::vector<Event>> Watch(std::string_view prefix, int64_t since,
                                   std::chrono::milliseconds timeout) override {
    return cache_.Watch(prefix, since, timeout);
  }
  void Close() override { cache_.Close(); }

 private:
  KvCache cache_;
};

}  // namespace

std::unique_ptr<Store> NewMemoryStore(size_t history) {
  return std::make_unique<MemoryStore>(history);
}

}  // namespace unipool::store
