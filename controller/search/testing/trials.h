// Trial records for the tests of the search and of the report built on it:
// one model "m", trials at a point and repeat with a status and a figure;
// and the outcomes the strategies read.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

#include "controller/search/campaign_records.h"
#include "controller/search/search.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller::testing_trials {

// A point that did not measure ok: infeasible or failed, for `reason`.
inline PointOutcome NotOk(PointOutcome::Kind kind, const std::string& reason) {
  PointOutcome o;
  o.kind = kind;
  o.reason = reason;
  return o;
}

// A trial of model "m" at `point`, repeat `repeat`, ended with `status`.
inline crest::v1::Trial Outcome(int64_t point, uint32_t repeat, crest::v1::TrialStatus status,
                                double speed = 0, const std::string& reason = "") {
  crest::v1::Trial t;
  t.set_id(absl::StrCat("c1-t", point, "-", repeat));
  t.set_model("m");
  t.mutable_parameters()->set_max_batch_size(point);
  t.set_repeat(repeat);
  t.set_status(status);
  t.set_reason(reason);
  t.mutable_result()->set_generate_speed(speed);
  t.mutable_result()->set_generate_speed_per_client(speed / 10);
  return t;
}

// A campaign of model "m" searched by `strategy` over [400, 700] from `initial`.
inline StoredCampaign OneModelSearch(const std::string& strategy, int64_t initial) {
  StoredCampaign stored;
  auto* spec = stored.campaign.mutable_spec();
  spec->add_models()->set_name("m");
  auto* search = spec->mutable_search();
  search->set_strategy(strategy);
  search->set_range_lo(400);
  search->set_range_hi(700);
  search->set_initial(initial);
  search->set_repeats(1);
  return stored;
}

}  // namespace crest::controller::testing_trials
