// `crest campaign ...`: placeholder until its issue lands.
#include <iostream>

#include "cli/commands.h"

namespace crest::cli {

void AddCampaignCommands(CLI::App& crest, Action* action) {
  CLI::App* group = crest.add_subcommand("campaign", "Run and inspect tuning campaigns");
  group->callback([action] {
    *action = [] {
      std::cerr << "crest: 'campaign' commands are not implemented yet\n";
      return 1;
    };
  });
}

}  // namespace crest::cli
