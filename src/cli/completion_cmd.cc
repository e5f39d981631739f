// `unipool completion bash|zsh`: a completion script generated from the
// command tree itself (so it never lags behind the commands), completing
// commands, their flags, files after flags that take one, and the names of
// jobs and nodes from the server (`get ... -o name`) where a command takes
// them.
#include <iostream>
#include <memory>
#include <set>

#include "cli/commands.h"

namespace unipool::cli {
namespace {

// The flags of `cmd`, space-separated, long and short forms.
std::string FlagsOf(const CLI::App* cmd) {
  std::string out = "--help";
  for (const CLI::Option* o : cmd->get_options()) {
    for (const std::string& n : o->get_lnames()) out += " --" + n;
    for (const std::string& n : o->get_snames()) out += " -" + n;
  }
  return out;
}

std::string SubcommandsOf(const CLI::App* cmd) {
  std::string out;
  for (const CLI::App* sub : cmd->get_subcommands({})) {
    if (sub->get_group().empty()) continue;  // hidden
    out += (out.empty() ? "" : " ") + sub->get_name();
  }
  return out;
}

// The bash function: one case per command (and per "command subcommand").
std::string BashScript(const CLI::App& app) {
  std::string flags, subs, nested;
  for (const CLI::App* cmd : app.get_subcommands({})) {
    if (cmd->get_group().empty()) continue;
    const std::string name = cmd->get_name();
    flags += "    " + name + ") opts=\"" + FlagsOf(cmd) + "\" ;;\n";
    if (cmd->get_subcommands({}).empty()) continue;
    subs += "      " + name + ") words=\"" + SubcommandsOf(cmd) + "\" ;;\n";
    for (const CLI::App* sub : cmd->get_subcommands({})) {
      const std::string both = name + " " + sub->get_name();
      flags += "    \"" + both + "\") opts=\"" + FlagsOf(sub) + "\" ;;\n";
      nested += "    \"" + both + "\") key=\"" + both + "\" ;;\n";
    }
  }
  return R"SH(# unipool completion for bash. Load it with
#   source <(unipool completion bash)
# or save it as /etc/bash_completion.d/unipool.
_unipool_names() {  # job or node: the names the server lists
  unipool get "$1s" -o name 2>/dev/null | sed "s|^$1/||"
}
_unipool() {
  local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
  local cmd="${COMP_WORDS[1]}" words="" opts=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W ")SH" +
         SubcommandsOf(&app) + R"SH( --help --version" -- "$cur"))
    return
  fi
  case "$prev" in
    -f|--filename|--cluster|--file|--tokens|--ca-cert|--trace|--model|--config|--data|--out)
      COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -o|--output) COMPREPLY=($(compgen -W "wide json yaml name" -- "$cur")); return ;;
    --state) COMPREPLY=($(compgen -W "Pending Running Preempting Succeeded Failed Cancelled up cordoned drained flaky down" -- "$cur")); return ;;
  esac
  if [ "$COMP_CWORD" -eq 2 ]; then
    case "$cmd" in
)SH" + subs + R"SH(      get|describe) words="jobs nodes queues" ;;
      cancel|logs) words="$(_unipool_names job)" ;;
      cordon|drain|uncordon) words="$(_unipool_names node)" ;;
    esac
  elif [ "$COMP_CWORD" -eq 3 ]; then
    case "$cmd ${COMP_WORDS[2]}" in
      "get job"*|"describe job"*) words="$(_unipool_names job)" ;;
      "get node"*|"describe node"*) words="$(_unipool_names node)" ;;
    esac
  fi
  local key="$cmd"
  if [ "$COMP_CWORD" -gt 2 ]; then
    case "$cmd ${COMP_WORDS[2]}" in
)SH" + nested + R"SH(    esac
  fi
  case "$key" in
)SH" + flags + R"SH(  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  fi
}
complete -F _unipool unipool
)SH";
}

}  // namespace

void AddCompletionCommand(CLI::App& app, int& exit_code) {
  auto shell = std::make_shared<std::string>();
  CLI::App* cmd = AddSubcommand(app, 
      "completion",
      "Print a bash or zsh completion script\n"
      "  source <(unipool completion bash)      in ~/.bashrc\n"
      "  source <(unipool completion zsh)       in ~/.zshrc");
  cmd->add_option("SHELL", *shell, "bash or zsh")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh"}));
  CLI::App* root = &app;
  cmd->callback([shell, root, &exit_code] {
    if (*shell == "zsh") {
      std::cout << "# unipool completion for zsh (bash's, through bashcompinit)\n"
                   "autoload -U +X bashcompinit && bashcompinit\n";
    }
    std::cout << BashScript(*root);
    exit_code = kExitOk;
  });
}

}  // namespace unipool::cli
