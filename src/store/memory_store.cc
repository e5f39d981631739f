// The in-memory Store: a KvCache whose every revision is durable at once.
#include "store/kv_cache.h"

namespace unipool::store {
namespace {

class MemoryStore final : public CachedStore {
 public:
  explicit MemoryStore(size_t history) : CachedStore(history) {}

  Result<int64_t> Apply(const Txn& txn) override {
    Result<int64_t> rev = cache_.Apply(txn, [](int64_t) {});
    if (rev.ok()) cache_.MarkDurable(*rev);
    return rev;
  }
};

}  // namespace

std::unique_ptr<Store> NewMemoryStore(size_t history) {
  return std::make_unique<MemoryStore>(history);
}

}  // namespace unipool::store
