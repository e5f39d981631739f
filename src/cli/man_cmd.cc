// `unipool man`: the unipool(1) manual page in roff, generated from the
// command tree (so it never lags behind the commands): every command with
// its description, examples and flags. `unipool man | man -l -` reads it;
// `unipool man > /usr/local/share/man/man1/unipool.1` installs it.
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "server/metrics.h"

namespace unipool::cli {
namespace {

// Text as roff takes it: backslashes doubled, a leading '.' or '\'' escaped.
std::string Roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
    line_start = c == '\n';
  }
  return out;
}

// "unipool: run a GPU cluster ..." -> "run a GPU cluster ...".
std::string Summary(const std::string& description) {
  const size_t colon = description.find(": ");
  return colon == std::string::npos ? description : description.substr(colon + 2);
}

void Command(std::ostream& out, const CLI::App& cmd, const std::string& path) {
  out << ".SS \"" << Roff(path) << "\"\n" << Roff(cmd.get_description()) << "\n";
  const std::string footer = cmd.get_footer();
  if (!footer.empty()) out << ".PP\n.nf\n" << Roff(footer.substr(footer.find_first_not_of('\n'))) << "\n.fi\n";
  for (const CLI::Option* o : cmd.get_options()) {
    if (o->get_name() == "--help" || o->get_name().empty()) continue;
    out << ".TP\n.B " << Roff(o->get_name(false, true)) << "\n"
        << Roff(o->get_description().empty() ? "(positional)" : o->get_description()) << "\n";
  }
  for (const CLI::App* sub : cmd.get_subcommands({})) {
    if (sub->get_group().empty()) continue;  // hidden
    Command(out, *sub, path + " " + sub->get_name());
  }
}

}  // namespace

void AddManCommand(CLI::App& app, int& exit_code) {
  CLI::App* cmd = AddSubcommand(app, "man",
                                "Print the unipool(1) manual page (roff)\n"
                                "  unipool man | man -l -\n"
                                "  unipool man > /usr/local/share/man/man1/unipool.1");
  CLI::App* root = &app;
  cmd->callback([root, &exit_code] {
    std::ostream& out = std::cout;
    out << ".TH UNIPOOL 1 \"\" \"unipool " << server::UnipoolVersion() << "\" \"User Commands\"\n"
        << ".SH NAME\nunipool \\- " << Roff(Summary(root->get_description())) << "\n"
        << ".SH SYNOPSIS\n.B unipool\n.I command\n[\\fIflags\\fR]\n"
        << ".SH DESCRIPTION\nOne binary: the control plane (server), the node agent (agent), the "
           "client commands (submit, get, describe, logs, cancel, ...), a local cluster (up), the "
           "simulator (sim) and the planner (plan). The guides are in the docs/ folder of the "
           "source: cli.md, api.md, operations.md, ui.md, sim.md, plan.md.\n"
        << ".SH COMMANDS\n";
    for (const CLI::App* sub : root->get_subcommands({})) {
      if (sub->get_group().empty()) continue;
      Command(out, *sub, "unipool " + sub->get_name());
    }
    out << ".SH ENVIRONMENT\n.TP\n.B UNIPOOL_SERVER\nthe server URL, or several separated by commas\n"
        << ".TP\n.B UNIPOOL_TOKEN\nthe API token\n.TP\n.B UNIPOOL_CONFIG\nthe client's config "
           "file (default ~/.config/unipool/config.yaml)\n"
        << ".SH EXIT STATUS\n0 success; 1 the operation failed; 2 bad input; 3 not found; 4 not "
           "allowed; 5 server unreachable.\n";
    exit_code = kExitOk;
  });
}

}  // namespace unipool::cli
