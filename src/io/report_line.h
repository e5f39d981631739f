// The lines a job appends to $UNIPOOL_REPORT_FILE (docs/cli.md, "Reports"):
// one JSON object per line, e.g.
//   {"step": 120, "loss": 2.31, "gradNorm": 0.8, "throughput": 5400,
//    "stepSeconds": 0.31, "dataSeconds": 0.02, "commSeconds": 0.08}
//   {"checkpoint": {"step": 100, "path": "...", "seconds": 4.2}}
// Python's json.dumps writes a NaN or infinite loss as a bare NaN /
// Infinity / -Infinity, which is not JSON; those tokens (outside strings)
// are read as the strings "NaN", "Infinity", "-Infinity", and LossValue
// reads them back as doubles.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "core/train/signals.h"

namespace unipool::io {

// The line's object; a discarded value when it is not one.
nlohmann::json ParseReportLine(std::string_view line);

// A loss or gradient norm as a report gives it: a number, or one of the
// strings above. nullopt for anything else.
std::optional<double> ReportNumber(const nlohmann::json& v);

// The line's per-rank step signals, when it has a step and stepSeconds
// (dataSeconds and commSeconds default to 0; each must be >= 0 and no more
// than stepSeconds). `rank` is the file's unless the line names its own.
std::optional<train::RankSample> RankSignals(const nlohmann::json& line, int32_t rank);

}  // namespace unipool::io
