// Strong types for the units unipool counts in. Each is an int64 with the
// arithmetic that makes sense for it; mixing units does not compile.
// Integer quantities keep decisions deterministic across machines.
#pragma once

#include <compare>
#include <cstdint>

namespace unipool {

template <class Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(int64_t v) : v_(v) {}
  constexpr int64_t value() const { return v_; }

  constexpr auto operator<=>(const Quantity&) const = default;
  constexpr Quantity operator+(Quantity o) const { return Quantity(v_ + o.v_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(v_ - o.v_); }
  constexpr Quantity& operator+=(Quantity o) { v_ += o.v_; return *this; }
  constexpr Quantity& operator-=(Quantity o) { v_ -= o.v_; return *this; }
  constexpr Quantity operator*(int64_t k) const { return Quantity(v_ * k); }
  constexpr Quantity operator/(int64_t k) const { return Quantity(v_ / k); }
  constexpr int64_t operator/(Quantity o) const { return v_ / o.v_; }

 private:
  int64_t v_ = 0;
};

struct GpusTag {};
struct BytesTag {};
struct NanosTag {};
struct BitsPerSecTag {};
struct GflopsTag {};
struct WattsTag {};

using Gpus = Quantity<GpusTag>;            // a number of GPUs
using Bytes = Quantity<BytesTag>;          // memory or message size
using Duration = Quantity<NanosTag>;       // nanoseconds
using Bandwidth = Quantity<BitsPerSecTag>; // bits per second
using FlopRate = Quantity<GflopsTag>;      // 1e9 floating-point ops per second
using Watts = Quantity<WattsTag>;

// A point in time: nanoseconds since the driver's epoch (the server uses the
// Unix epoch; the simulator starts at 0). Core never reads a clock.
using Time = Duration;

constexpr Duration Nanoseconds(int64_t n) { return Duration(n); }
constexpr Duration Microseconds(int64_t n) { return Duration(n * 1000); }
constexpr Duration Milliseconds(int64_t n) { return Duration(n * 1000000); }
constexpr Duration Seconds(int64_t n) { return Duration(n * 1000000000); }
constexpr double ToSeconds(Duration d) { return d.value() * 1e-9; }

constexpr Bandwidth Gbps(int64_t g) { return Bandwidth(g * 1000000000); }
constexpr double ToGbps(Bandwidth b) { return b.value() * 1e-9; }
constexpr Bytes GiB(int64_t g) { return Bytes(g << 30); }
constexpr double ToTflops(FlopRate f) { return f.value() * 1e-3; }

}  // namespace unipool
