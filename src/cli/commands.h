// The subcommands of the `unipool` binary. Each Add* registers its
// subcommand on the app; the callback runs the command and returns the
// process exit code through `exit_code`.
//
// Exit codes scripts can rely on: 0 success, 1 the operation failed,
// 2 bad input (usage, files, specs), 3 not found, 4 not allowed (token
// missing, unknown or without the role), 5 server unreachable.
#pragma once

#include <CLI/CLI.hpp>

namespace unipool::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitNotFound = 3;
inline constexpr int kExitDenied = 4;
inline constexpr int kExitUnreachable = 5;

// A subcommand whose help is one line, then examples: the first line is
// what `unipool --help` lists, the rest the command's own --help shows
// under "Examples:".
inline CLI::App* AddSubcommand(CLI::App& parent, const std::string& name,
                               const std::string& help) {
  const size_t nl = help.find('\n');
  CLI::App* cmd = parent.add_subcommand(name, help.substr(0, nl));
  if (nl != std::string::npos) cmd->footer("\nExamples:\n" + help.substr(nl + 1));
  return cmd;
}

void AddTopoCommand(CLI::App& app, int& exit_code);
void AddBenchCommand(CLI::App& app, int& exit_code);
void AddSimCommand(CLI::App& app, int& exit_code);
void AddPlanCommand(CLI::App& app, int& exit_code);
void AddServerCommand(CLI::App& app, int& exit_code);
void AddClientCommands(CLI::App& app, int& exit_code);
void AddAgentCommands(CLI::App& app, int& exit_code);
void AddLogsCommand(CLI::App& app, int& exit_code);
void AddDescribeCommand(CLI::App& app, int& exit_code);
// `unipool diagnose JOB` (in describe_cmd.cc).
void AddDiagnoseCommand(CLI::App& app, int& exit_code);
void AddAcctCommand(CLI::App& app, int& exit_code);
void AddUpCommand(CLI::App& app, int& exit_code);
// `unipool completion bash|zsh`: a shell completion script for the commands
// registered before it (call it last).
void AddCompletionCommand(CLI::App& app, int& exit_code);
// `unipool man`: the manual page from the same tree (call it last too).
void AddManCommand(CLI::App& app, int& exit_code);
// `unipool bench api`, under the `bench` command.
void AddBenchApiCommand(CLI::App& bench, int& exit_code);
// `unipool bench placement`, under the `bench` command.
void AddBenchPlacementCommand(CLI::App& bench, int& exit_code);

}  // namespace unipool::cli
