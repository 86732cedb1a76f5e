#include "common/command_line.h"

#include <iostream>
#include <vector>

namespace crest {

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::cout << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    // CLI11 checks required options before unknown ones, so `crest-agent --bogus`
    // would be reported as a missing --listen. The unknown argument is the
    // mistake to name: a misspelt flag often is the "missing" one.
    if (std::vector<std::string> unknown = app.remaining(true);
        !unknown.empty() && !app.get_allow_extras()) {
      what = CLI::ExtrasError(unknown).what();
    }
    for (char& c : what) {
      if (c == '\n') c = ' ';
    }
    std::cerr << app.get_name() << ": " << what << " (see --help)\n";
    return 2;
  }
  return std::nullopt;
}

int FailWithMessage(const CLI::App& app, std::string_view message) {
  std::cerr << app.get_name() << ": " << message << "\n";
  return 1;
}

}  // namespace crest
