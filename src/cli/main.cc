// unipool: one binary, many subcommands. Parses the command line, hands off
// to the subcommand and returns its exit code. Usage errors exit with 2.
#include <algorithm>
#include <iostream>

#include "cli/commands.h"
#include "cli/suggest.h"
#include "server/metrics.h"

int main(int argc, char** argv) {
  using namespace unipool::cli;
  CLI::App app{"unipool: run a GPU cluster, from one 8-GPU box to a million GPUs, as one machine"};
  app.name("unipool");
  app.set_version_flag("--version", std::string("unipool ") + unipool::server::UnipoolVersion());
  app.require_subcommand(1);
  int exit_code = kExitOk;
  AddTopoCommand(app, exit_code);
  AddBenchCommand(app, exit_code);
  AddSimCommand(app, exit_code);
  AddPlanCommand(app, exit_code);
  AddServerCommand(app, exit_code);
  AddClientCommands(app, exit_code);
  AddDescribeCommand(app, exit_code);
  AddDiagnoseCommand(app, exit_code);
  AddAgentCommands(app, exit_code);
  AddLogsCommand(app, exit_code);
  AddAcctCommand(app, exit_code);
  AddUpCommand(app, exit_code);
  AddCompletionCommand(app, exit_code);
  AddManCommand(app, exit_code);
  // A command word unipool does not have: say which one the user means.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    const std::string word = argv[1];
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      const std::string hint = SuggestCommand(word, names);
      std::cerr << "error: unknown command '" << word << "'"
                << (hint.empty() ? "" : "; did you mean 'unipool " + hint + "'?") << "\n"
                << "run 'unipool --help' for the commands\n";
      return kExitBadInput;
    }
  }
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
