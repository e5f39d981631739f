// The commands of the tools unipool's users come from (kubectl delete,
// scancel, squeue, sinfo) mapped to unipool's, for "did you mean".
#pragma once

#include <string>
#include <vector>

namespace unipool::cli {

// For a command word unipool does not have: the unipool command a user of
// kubectl or Slurm means ("delete" -> "cancel", "squeue" -> "get jobs"), or
// the nearest of `commands` (io::Nearest); "" when nothing is near.
std::string SuggestCommand(const std::string& got, const std::vector<std::string>& commands);

}  // namespace unipool::cli
