// unipool: one binary, many subcommands. Parses the command line, hands off
// to the subcommand and returns its exit code. Usage errors exit with 2.
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace unipool::cli;
  CLI::App app{"unipool: run a GPU cluster, from one 8-GPU box to a million GPUs, as one machine"};
  app.name("unipool");
  app.set_version_flag("--version", "unipool 0.1.0");
  app.require_subcommand(1);
  int exit_code = kExitOk;
  AddTopoCommand(app, exit_code);
  AddBenchCommand(app, exit_code);
  AddSimCommand(app, exit_code);
  AddPlanCommand(app, exit_code);
  AddServerCommand(app, exit_code);
  AddClientCommands(app, exit_code);
  AddAgentCommands(app, exit_code);
  AddUpCommand(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: " << e.what() << "\n";
    std::cerr << "run 'unipool --help' for usage\n";
    return kExitBadInput;
  }
  return exit_code;
}
