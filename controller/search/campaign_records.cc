#include "controller/search/campaign_records.h"

namespace crest::controller {

bool IsFinal(crest::v1::TrialStatus status) {
  switch (status) {
    case crest::v1::TRIAL_OK:
    case crest::v1::TRIAL_FAILED:
    case crest::v1::TRIAL_INFEASIBLE:
    case crest::v1::TRIAL_INTERRUPTED:
    case crest::v1::TRIAL_CANCELLED:
      return true;
    default:
      return false;
  }
}

bool IsFinal(crest::v1::CampaignState state) {
  return state == crest::v1::CAMPAIGN_SUCCEEDED || state == crest::v1::CAMPAIGN_FAILED ||
         state == crest::v1::CAMPAIGN_CANCELLED;
}

}  // namespace crest::controller
