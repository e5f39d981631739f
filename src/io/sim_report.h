// The sim's HTML report: one self-contained page (inline SVG charts, no
// scripts or network) that opens offline in a browser, or in the
// dashboard. What a capacity planner reads, policy beside policy:
//   - the side-by-side summary (the same rows as `unipool sim`'s text);
//   - over time: GPUs allocated and doing useful work (goodput), GPUs
//     failed and drained for maintenance (maintenance windows shaded on
//     every time chart), queue length, failures per day by cause, work
//     lost;
//   - per queue: GPUs in use against the queue's guarantee;
//   - JCT and wait CDFs by job size (their quantiles are the tables');
//   - ETTR and mean time to interruption (log axis) by job size, and the
//     per-size and per-cause tables.
#pragma once

#include <string>
#include <vector>

#include "io/sim_writer.h"

namespace unipool::io {

std::string SimHtml(const SimHeader& h, const std::vector<SimRun>& runs);

}  // namespace unipool::io
