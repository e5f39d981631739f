#include "cli/client_common.h"

#include <yaml-cpp/yaml.h>

#include <chrono>

#include "io/yaml_fields.h"

namespace unipool::cli {

void AddCommon(CLI::App* cmd, Common& c, bool output) {
  cmd->add_option("--server", c.config.server, "server URL (else $UNIPOOL_SERVER, config file)");
  cmd->add_option("--token", c.config.token, "bearer token (else $UNIPOOL_TOKEN, config file)");
  cmd->add_option("--ca-cert", c.config.ca_cert, "PEM file to trust for https");
  if (output) {
    cmd->add_option("-o,--output", c.output, "wide, json, yaml or name (kind/name per line)")
        ->check(CLI::IsMember({"wide", "json", "yaml", "name"}));
  }
}

int Fail(const Status& st) {
  std::cerr << "error: " << st.message() << "\n";
  return ExitCodeFor(st);
}

namespace {

void EmitYaml(YAML::Emitter& out, const Json& j) {
  if (j.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, v] : j.items()) {
      out << YAML::Key << k << YAML::Value;
      EmitYaml(out, v);
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    out << YAML::BeginSeq;
    for (const Json& v : j) EmitYaml(out, v);
    out << YAML::EndSeq;
  } else if (j.is_string()) {
    // Quote what YAML would read back as another type ("200", "true", "").
    const std::string v = j.get<std::string>();
    const YAML::Node probe = YAML::Load(v.empty() ? "''" : v);
    int64_t n;
    const bool plain = !v.empty() && probe.IsScalar() && probe.Scalar() == v &&
                       !io::ParseInt64(v, &n) && v != "true" && v != "false" && v != "null" &&
                       v != "~" && v.find_first_of(":#{}[],&*!|>'\"%@`") == std::string::npos;
    if (plain) {
      out << v;
    } else {
      out << YAML::DoubleQuoted << v;
    }
  } else if (j.is_null()) {
    out << YAML::Null;
  } else {
    out << j.dump();
  }
}

}  // namespace

void Print(const Json& j, const std::string& output) {
  if (output == "yaml") {
    YAML::Emitter out;
    EmitYaml(out, j);
    std::cout << out.c_str() << "\n";
  } else {
    std::cout << j.dump(2) << "\n";
  }
}

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace unipool::cli
