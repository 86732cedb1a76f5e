// A ProcessRunner (loadgen/mindie_adapter.h) for the tool adapters' tests:
// replays a recorded run of the tool and remembers what it was asked to run.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "loadgen/mindie_adapter.h"

namespace crest::loadgen::testing {

class RecordedRunner final : public ProcessRunner {
 public:
  explicit RecordedRunner(std::string output, int exit_code = 0)
      : output_(std::move(output)), exit_code_(exit_code) {}
  absl::StatusOr<ProcessResult> Run(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env) override {
    argv_ = argv;
    env_ = env;
    return ProcessResult{exit_code_, output_};
  }
  std::vector<std::string> argv_;
  std::vector<std::string> env_;

 private:
  std::string output_;
  int exit_code_;
};

}  // namespace crest::loadgen::testing
