// A check that holds in every build type: a fuzz target's invariants must
// stop the run (a crash libFuzzer records) even where NDEBUG drops assert().
#pragma once

#include <cstdio>
#include <cstdlib>

#define CREST_FUZZ_CHECK(cond)                                                          \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)
