// `crest node ...`: placeholder until its issue lands.
#include <iostream>

#include "cli/commands.h"

namespace crest::cli {

void AddNodeCommands(CLI::App& crest, Action* action) {
  CLI::App* group = crest.add_subcommand("node", "Call one node agent directly");
  group->callback([action] {
    *action = [] {
      std::cerr << "crest: 'node' commands are not implemented yet\n";
      return 1;
    };
  });
}

}  // namespace crest::cli
