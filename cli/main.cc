// crest: the operator CLI for Crest's agents and controller.
#include "cli/commands.h"

#include "common/command_line.h"

int main(int argc, char** argv) {
  CLI::App app("crest: operate Crest node agents and tuning campaigns", "crest");
  app.require_subcommand(1);
  crest::cli::Action action;
  crest::cli::AddNodeCommands(app, &action);
  crest::cli::AddCampaignCommands(app, &action);
  crest::cli::AddProfileCommands(app, &action);
  crest::cli::AddHealthCommand(app, &action);
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  if (!action) return crest::FailWithMessage(app, "no command given (see --help)");
  return action();
}
