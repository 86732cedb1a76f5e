// crest-bench: placeholder until its issue lands.
#include "common/command_line.h"

int main(int argc, char** argv) {
  CLI::App app("crest-bench: the Crest load generator", "crest-bench");
  crest::TlsOptions tls;
  crest::AddTlsFlags(app, tls);
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  return crest::FailWithMessage(app, "not implemented yet");
}
