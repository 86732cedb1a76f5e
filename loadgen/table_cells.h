// The cells of the result tables the benchmark tools print (MindIE's
// `benchmark`, AISBench): a number with a unit or a note after it, "/" for
// none. Shared by their adapters.
#pragma once

#include "absl/strings/string_view.h"

namespace crest::loadgen {

// Leading number of a cell such as "129.7513 ms", "1000( 100.0% )",
// "8792[ 100.0% ]" or "35.9 token/s"; false for "/", "/ μs" or text, and
// `*value` is then left as it was.
bool LeadingNumber(absl::string_view cell, double* value);

// Every figure is a count, a time or a rate: finite, not negative, and small
// enough (at most kLargestFigure) to convert to a result's integer fields.
inline constexpr double kLargestFigure = 1e15;
bool Plausible(double v);

}  // namespace crest::loadgen
