#include "core/sim/young_daly.h"

#include <cmath>

namespace unipool::sim {

static Duration FromSeconds(double s) { return Nanoseconds(std::llround(s * 1e9)); }

Duration YoungInterval(Duration checkpoint_cost, Duration mtbf) {
  return FromSeconds(std::sqrt(2.0 * ToSeconds(checkpoint_cost) * ToSeconds(mtbf)));
}

Duration DalyInterval(Duration checkpoint_cost, Duration mtbf) {
  const double d = ToSeconds(checkpoint_cost), m = ToSeconds(mtbf);
  if (d >= 2 * m) return mtbf;
  const double young = std::sqrt(2 * d * m);
  return FromSeconds(young * (1 + std::sqrt(d / (2 * m)) / 3 + d / (18 * m)) - d);
}

double FirstOrderEttr(Duration checkpoint_cost, Duration mtbf, Duration restart) {
  const double m = ToSeconds(mtbf);
  return 1.0 / (1.0 + std::sqrt(2 * ToSeconds(checkpoint_cost) / m) + ToSeconds(restart) / m);
}

Duration JobMtbf(double per_1000_node_days, int64_t nodes) {
  return FromSeconds(1000.0 * 86400.0 / (per_1000_node_days * static_cast<double>(nodes)));
}

}  // namespace unipool::sim
