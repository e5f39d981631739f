// Rng: the one seeded source of randomness, passed by reference to whatever
// needs it. xoshiro256** seeded through splitmix64; the distributions are
// written out here (not <random>'s) so a seed gives the same numbers with
// every standard library.
#pragma once

#include <cmath>
#include <cstdint>

namespace unipool {

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (uint64_t& s : s_) {
      seed += 0x9e3779b97f4a7c15ULL;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      s = z ^ (z >> 31);
    }
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform integer in [0, n). REQUIRES: n > 0.
  uint64_t Below(uint64_t n) { return Next() % n; }
  double Exponential(double mean) { return -mean * std::log1p(-Uniform()); }
  // Weibull with the given mean and shape k (k = 1 is exponential).
  double Weibull(double mean, double shape) {
    const double scale = mean / std::tgamma(1.0 + 1.0 / shape);
    return scale * std::pow(-std::log1p(-Uniform()), 1.0 / shape);
  }
  double Normal() {  // Box-Muller
    const double u1 = 1.0 - Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double LogNormal(double median, double sigma) { return median * std::exp(sigma * Normal()); }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace unipool
