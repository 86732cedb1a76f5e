// The `crest` operator CLI is a set of command groups; each group adds its
// subcommands to the app and, when one is chosen, sets the action to run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "absl/strings/string_view.h"

namespace crest::cli {

// Runs the chosen command after parsing; returns the process exit code.
using Action = std::function<int()>;

// Prints "crest: <message>" on stderr and returns 1, the exit code of a failed command.
int Fail(absl::string_view message);

// `crest node info|tune|restore|start|stop|bench --agent ADDR ...` (one agent).
void AddNodeCommands(CLI::App& crest, Action* action);

// `crest campaign submit|list|status|watch|cancel|report --controller ADDR ...`.
void AddCampaignCommands(CLI::App& crest, Action* action);

// `crest profile fit|predict`: mindie-sim's model fitted to a campaign, and
// its predictions for workloads nobody measured.
void AddProfileCommands(CLI::App& crest, Action* action);

// `crest health --address ADDR`: grpc.health.v1 over mutual TLS (the probes' check).
void AddHealthCommand(CLI::App& crest, Action* action);

}  // namespace crest::cli
