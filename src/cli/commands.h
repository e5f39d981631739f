// The subcommands of the `unipool` binary. Each Add* registers its
// subcommand on the app; the callback runs the command and returns the
// process exit code through `exit_code`.
//
// Exit codes scripts can rely on: 0 success, 1 the operation failed,
// 2 bad input (usage, files, specs).
#pragma once

#include <CLI/CLI.hpp>

namespace unipool::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitBadInput = 2;

void AddTopoCommand(CLI::App& app, int& exit_code);
void AddBenchCommand(CLI::App& app, int& exit_code);
void AddSimCommand(CLI::App& app, int& exit_code);
void AddPlanCommand(CLI::App& app, int& exit_code);

}  // namespace unipool::cli
