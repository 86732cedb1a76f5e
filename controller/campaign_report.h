// The report model of a campaign: per model its best configuration and every
// trial, as GetCampaignReport returns it, and the verdict a campaign ends
// with. Built from the stored campaign alone; report.h renders the report
// (JSON, table, CSV) for the CLI.
#pragma once

#include <string>
#include <vector>

#include "controller/store.h"
#include "crest/v1/controller.pb.h"

namespace crest::controller {

crest::v1::CampaignReport BuildReport(const StoredCampaign& stored);

// Sets the state and reason `campaign` (a copy of stored.campaign) ends with
// once its searches are done or it was cancelled: cancelled, succeeded when
// every model has a best point, else failed naming the models without one
// and why their search ended. `unrestored` names the nodes whose host
// settings could not be restored.
void SetCampaignEnd(const StoredCampaign& stored, const std::vector<std::string>& unrestored,
                    crest::v1::Campaign* campaign);

}  // namespace crest::controller
