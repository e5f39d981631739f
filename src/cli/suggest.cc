#include "cli/suggest.h"

#include <map>

#include "io/suggest.h"

namespace unipool::cli {
std::string SuggestCommand(const std::string& got, const std::vector<std::string>& commands) {
  static const std::map<std::string, std::string> kFromOtherTools = {
      {"delete", "cancel"},       {"rm", "cancel"},          {"kill", "cancel"},
      {"scancel", "cancel"},      {"stop", "cancel"},        {"squeue", "get jobs"},       {"sreport", "acct --totals"},
      {"ps", "get jobs"},         {"list", "get jobs"},      {"ls", "get jobs"},
      {"sacct", "acct"}, {"sinfo", "get nodes"}, {"show", "describe"},
      {"scontrol", "describe"},   {"log", "logs"},           {"sbatch", "submit"},
      {"apply", "submit"},        {"create", "submit"},      {"run", "submit"},
      {"top", "status"},          {"info", "status"},        {"help", "--help"}};
  if (auto it = kFromOtherTools.find(got); it != kFromOtherTools.end()) return it->second;
  return io::Nearest(got, commands);
}

}  // namespace unipool::cli
