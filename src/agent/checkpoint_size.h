// What a checkpoint wrote, measured on the node: the agent forwards the
// size of each checkpoint a job reports without one ({"checkpoint":
// {"step": 100, "path": DIR}}), so the server keeps the job's measured
// checkpoint cost (docs/operations.md#what-a-job-sees).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace unipool::agent {

// The bytes of the regular files under `path` (a file or a directory, walked
// without following symbolic links) modified at or after `since`: what one
// checkpoint wrote into a directory that keeps the earlier ones too.
// Only inside `root` (the job's checkpoint directory): a path that leads
// elsewhere, once resolved, is not measured, so a job cannot make the agent
// look at other files. At most `max_entries` entries are looked at.
// nullopt: outside root, absent, unreadable, or more entries than that.
std::optional<int64_t> CheckpointBytes(const std::string& path, const std::string& root,
                                       std::filesystem::file_time_type since,
                                       int64_t max_entries = 100000);

}  // namespace unipool::agent
