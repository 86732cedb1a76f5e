#include "loadgen/table_cells.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace crest::loadgen {

bool LeadingNumber(absl::string_view cell, double* value) {
  cell = absl::StripAsciiWhitespace(cell);
  size_t end = 0;
  while (end < cell.size() &&
         (absl::ascii_isdigit(static_cast<unsigned char>(cell[end])) || cell[end] == '.' ||
          cell[end] == '-' || cell[end] == '+' || cell[end] == 'e' || cell[end] == 'E')) {
    ++end;
  }
  // SimpleAtod writes what it parsed of "-03-11" (-3) even as it refuses it,
  // so the caller's value is only touched on success.
  double parsed = 0;
  if (end == 0 || !absl::SimpleAtod(cell.substr(0, end), &parsed)) return false;
  *value = parsed;
  return true;
}

bool Plausible(double v) { return std::isfinite(v) && v >= 0 && v <= kLargestFigure; }

}  // namespace crest::loadgen
