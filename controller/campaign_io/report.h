// Renderings of a CampaignReport: the JSON of the contract, a
// per-model table (maxBatchSize -> GenerateSpeedPerClient / GenerateSpeed,
// peak marked, like the practice's 435 / 500 / 600 table) and CSV (one row
// per trial). Shared by the controller and `crest campaign report`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "crest/v1/controller.pb.h"

namespace crest::controller {

// "ok", "failed", "infeasible", "interrupted", "cancelled", "running", "pending".
std::string TrialStatusName(crest::v1::TrialStatus status);
// "pending", "running", "succeeded", "failed", "cancelled".
std::string CampaignStateName(crest::v1::CampaignState state);

nlohmann::json ReportToJson(const crest::v1::CampaignReport& report);
std::string ReportToTable(const crest::v1::CampaignReport& report);
std::string ReportToCsv(const crest::v1::CampaignReport& report);

// RFC 3339 UTC, or "" for an unset timestamp.
std::string FormatTimestamp(const google::protobuf::Timestamp& t);

}  // namespace crest::controller
