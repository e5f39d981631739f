// What the client commands (client_cmd.cc, describe_cmd.cc) share: the
// flags every one takes (--server, --token, --ca-cert, -o), running with a
// ready client, errors as exit codes, and printing the API's JSON as JSON
// or YAML.
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "cli/client.h"
#include "cli/commands.h"

namespace unipool::cli {

struct Common {
  ClientConfig config;
  std::string output;  // "" (table), wide, json, yaml, name
};

// --server, --token, --ca-cert; and -o unless `output` is false.
void AddCommon(CLI::App* cmd, Common& c, bool output = true);

// Prints "error: ..." and returns the exit code for `st` (ExitCodeFor).
int Fail(const Status& st);

// Runs `fn` with a ready client; config errors exit 2.
template <class Fn>
int WithClient(Common& c, Fn fn) {
  if (Status st = ResolveClientConfig(&c.config); !st.ok()) {
    std::cerr << "error: " << st.message() << "\n";
    return kExitBadInput;
  }
  return fn(Client(c.config));
}

// `j` as indented JSON, or as YAML with `output` "yaml" (strings YAML
// would read back as another type are quoted).
void Print(const Json& j, const std::string& output);

// The system clock, in seconds since the epoch.
int64_t NowSeconds();

}  // namespace unipool::cli
