// A campaign report with everything the HTML report draws: two models,
// repeats (error bars), a calibration run, an infeasible and a preempting
// point, a failed trial with a reason holding markup, host settings and
// times; for the renderers' tests.
#pragma once

#include "crest/v1/controller.pb.h"

namespace crest::controller::testing {

crest::v1::CampaignReport SampleReport();
crest::v1::Campaign SampleCampaign();
// Ok trials in SampleReport() (calibration included).
int SampleOkTrials();

}  // namespace crest::controller::testing
