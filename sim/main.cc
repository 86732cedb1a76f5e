// mindie-sim: placeholder until the simulator lands.
#include "common/command_line.h"

int main(int argc, char** argv) {
  CLI::App app("mindie-sim: a simulated MindIE Service daemon", "mindie-sim");
  std::string config;
  app.add_option("--config", config, "config.json to use");
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  return crest::FailWithMessage(app, "not implemented yet");
}
