#include "controller/search/campaign_records.h"

namespace crest::controller {

ModelState ModelStateOf(const StoredCampaign& stored, const std::string& model) {
  auto it = stored.models.find(model);
  return it == stored.models.end() ? ModelState{} : it->second;
}

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
