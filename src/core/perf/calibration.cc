#include "core/perf/calibration.h"

#include <string>

namespace unipool::perf {

namespace {

bool StartsWith(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

}  // namespace

CalibrationClass ClassOf(const Job& job, const GpuModel& gpu) {
  if (job.model.is_moe()) return CalibrationClass::kMoe;
  const std::string& n = gpu.name;
  if (StartsWith(n, "B200") || StartsWith(n, "GB200")) return CalibrationClass::kBlackwell;
  const bool hopper_or_ampere = StartsWith(n, "A100") || StartsWith(n, "H100") ||
                                StartsWith(n, "H200") || StartsWith(n, "H800");
  if (!hopper_or_ampere) return CalibrationClass::kOther;
  if (job.framework.fp8 && gpu.peak_fp8.value() > 0) return CalibrationClass::kFp8;
  return CalibrationClass::kDense;
}

const std::vector<CalibrationStatus>& CalibrationTable() {
  // From CalibrationTest.CalibrationAndValidationSets on the 83-row
  // calibration set (it checks these figures against the data).
  static const std::vector<CalibrationStatus> kTable = {
      {CalibrationClass::kDense, "dense BF16 on A100/H100", 65, 0.047, 0.084},
      {CalibrationClass::kFp8, "FP8 on H100", 12, 0.053, 0.130},
      {CalibrationClass::kMoe, "mixture-of-experts", 5, 0.064, 0.318},
      {CalibrationClass::kBlackwell, "Blackwell (B200/GB200)", 1, 0.006, 0.006},
      {CalibrationClass::kOther, "other GPUs", 0, 0, 0},
  };
  return kTable;
}

const CalibrationStatus& CalibrationOf(CalibrationClass c) {
  return CalibrationTable()[static_cast<size_t>(c)];
}

}  // namespace unipool::perf
