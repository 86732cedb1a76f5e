// crest-controller: placeholder until its issue lands.
#include "common/command_line.h"

int main(int argc, char** argv) {
  CLI::App app("crest-controller: the Crest campaign controller", "crest-controller");
  crest::TlsOptions tls;
  crest::AddTlsFlags(app, tls);
  if (auto rc = crest::ParseCommandLine(app, argc, argv)) return *rc;
  return crest::FailWithMessage(app, "not implemented yet");
}
