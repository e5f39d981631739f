// How far the cost model's predictions have been from measured runs like the
// one asked about. A job falls in one calibration class (dense BF16 on
// A100/H100-class GPUs, FP8 on them, mixture-of-experts, Blackwell, other
// GPUs); for each class the table gives how many published runs of the
// calibration set (testdata/perf/, 83 rows) the model was checked on and the
// median and 80th-percentile |error| of its tokens/s predictions there.
// CalibrationTest recomputes the table from the data and fails when a change
// to the model moves it, so the numbers printed with a plan stay true.
//
// Pure: no I/O.
#pragma once

#include <vector>

#include "core/perf/cost_model.h"

namespace unipool::perf {

enum class CalibrationClass { kDense, kFp8, kMoe, kBlackwell, kOther };

struct CalibrationStatus {
  CalibrationClass cls = CalibrationClass::kOther;
  const char* name = "";        // "dense BF16 on A100/H100"
  int rows = 0;                 // published runs of this class checked
  double median_abs_error = 0;  // fraction: 0.075 = 7.5%
  double p80_abs_error = 0;     // 80% of the rows were within this
  // Enough rows to quote a band; fewer is "uncalibrated".
  bool calibrated() const { return rows >= kMinRows; }
  static constexpr int kMinRows = 10;
};

// MoE first, then Blackwell GPUs, then FP8 (where the GPU has it), then
// A100/H100/H200/H800 as dense; anything else is kOther.
CalibrationClass ClassOf(const Job& job, const GpuModel& gpu);

const CalibrationStatus& CalibrationOf(CalibrationClass c);

// Every class, in enum order.
const std::vector<CalibrationStatus>& CalibrationTable();

}  // namespace unipool::perf
