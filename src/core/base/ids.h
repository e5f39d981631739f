// Dense integer ids. Each kind of id is its own type so a NodeId cannot be
// passed where a GpuId is expected. Ids index flat arrays: 0..count-1.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace unipool {

template <class Tag>
class Id {
 public:
  constexpr Id() = default;
  constexpr explicit Id(int32_t v) : v_(v) {}
  constexpr int32_t value() const { return v_; }
  constexpr bool valid() const { return v_ >= 0; }
  constexpr auto operator<=>(const Id&) const = default;

 private:
  int32_t v_ = -1;
};

using NodeId = Id<struct NodeIdTag>;    // a host: where one agent runs
using GpuId = Id<struct GpuIdTag>;      // one accelerator, cluster-wide
using GroupId = Id<struct GroupIdTag>;  // one switch group within a tier

}  // namespace unipool

template <class Tag>
struct std::hash<unipool::Id<Tag>> {
  size_t operator()(unipool::Id<Tag> id) const {
    return std::hash<int32_t>()(id.value());
  }
};
