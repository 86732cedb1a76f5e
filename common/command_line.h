// Command-line conventions shared by every Crest binary (CLI11): one clear
// line on stderr for any usage error. The TLS flags are in common/tls.h.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace crest {

// Parses argv. Returns std::nullopt when the program should go on, or the exit
// code to return now: 0 after --help, 2 after a usage error, which is printed
// as a single line "<program>: <what is wrong> (see --help)". An unknown
// argument is named first, before any missing required option.
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv);

// Prints "<program>: <message>" to stderr and returns 1, for errors found
// after parsing (bad flag values, unreachable peers).
int FailWithMessage(const CLI::App& app, std::string_view message);

}  // namespace crest
