// Checkpoint intervals and the first-order model of effective training time.
//
//   Young (1974):   tau = sqrt(2 * delta * M)
//   Daly (2006):    tau = sqrt(2 delta M) * (1 + sqrt(delta/(2M))/3 + delta/(18 M)) - delta
//                   for delta < 2M, else M
//   ETTR (first order, tau = Young):  1 / (1 + sqrt(2 delta / M) + R / M)
//
// delta: time to write a checkpoint; M: the job's mean time between
// interruptions; R: time to restart (detect, reschedule, reload).
#pragma once

#include "core/base/units.h"

namespace unipool::sim {

Duration YoungInterval(Duration checkpoint_cost, Duration mtbf);
Duration DalyInterval(Duration checkpoint_cost, Duration mtbf);
double FirstOrderEttr(Duration checkpoint_cost, Duration mtbf, Duration restart);
// A job on `nodes` nodes, each failing `per_1000_node_days` times per
// 1,000 node-days, is interrupted on average every this long.
Duration JobMtbf(double per_1000_node_days, int64_t nodes);

}  // namespace unipool::sim
