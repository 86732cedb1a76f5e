// mindie-sim's process: flags, config.json lookup and checks, profile choice,
// KV-cache planning, the three listeners, start-up delay, signals. Exit codes:
// 0 after SIGTERM/SIGINT or /stopService, 1 for out of memory and run-time
// failures (e.g. a port in use), 2 for usage and configuration errors.
#pragma once

namespace crest::sim {

int RunDaemon(int argc, char** argv);

}  // namespace crest::sim
