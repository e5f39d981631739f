// Writers for ClusterSummary: a table for people, JSON for machines.
#pragma once

#include <string>

#include "core/topology/summary.h"

namespace unipool::io {

std::string SummaryText(const ClusterSummary& s);
std::string SummaryJson(const ClusterSummary& s);  // one JSON object, pretty

// Human units: "1,048,576"; "3.2 Tb/s"; "11.47 MW".
std::string Thousands(int64_t v);
std::string HumanBandwidth(Bandwidth b);
std::string HumanPower(Watts w);
std::string HumanFlops(FlopRate f);
std::string HumanBytes(Bytes b);

}  // namespace unipool::io
