// mindie-sim: a simulated MindIE Service daemon (see docs/simulator.md).
#include "sim/daemon.h"

int main(int argc, char** argv) { return crest::sim::RunDaemon(argc, argv); }
