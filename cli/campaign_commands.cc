// `crest campaign submit|list|status|watch|cancel|report|agents`: the
// operator's view of the controller. Specs are parsed and validated here
// first (every problem with its line), and again by the controller.
#include <grpcpp/client_context.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cli/commands.h"

#include "common/command_line.h"
#include "common/file_util.h"
#include "common/status.h"
#include "common/tls.h"
#include "controller/report.h"
#include "controller/report_html.h"
#include "controller/spec_parser.h"
#include "crest/v1/controller.grpc.pb.h"

namespace crest::cli {
namespace {

using crest::controller::CampaignStateName;
using crest::v1::Campaign;

constexpr absl::Duration kCallTimeout = absl::Seconds(15);

struct CommonFlags {
  std::string controller;
  TlsOptions tls;
  std::string output = "text";
};

void AddCommon(CLI::App* cmd, CommonFlags* flags, bool output) {
  cmd->add_option("--controller", flags->controller, "Controller address, host:port")->required();
  AddTlsFlags(*cmd, flags->tls);
  if (output) {
    cmd->add_option("--output", flags->output, "text (default) or json")
        ->check(CLI::IsMember({"text", "json"}));
  }
}

absl::StatusOr<std::unique_ptr<crest::v1::Controller::Stub>> Connect(const CommonFlags& flags) {
  auto channel = MakeChannel(flags.controller, flags.tls);
  if (!channel.ok()) return channel.status();
  return crest::v1::Controller::NewStub(*channel);
}

int RpcFail(const CommonFlags& flags, const grpc::Status& status) {
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
      status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return Fail(absl::StrCat("cannot reach the controller at ", flags.controller, ": ",
                             status.error_message()));
  }
  return Fail(status.error_message());
}

void SetDeadline(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

nlohmann::json BestJson(const crest::v1::ModelProgress& m) {
  if (!m.has_best()) return nullptr;
  const auto& p = m.best().parameters();
  return {{"maxBatchSize", p.max_batch_size()},
          {"maxPrefillBatchSize", p.max_prefill_batch_size()},
          {"supportSelectBatch", p.support_select_batch()},
          {"prefillTimeMsPerReq", p.prefill_time_ms_per_req()},
          {"decodeTimeMsPerReq", p.decode_time_ms_per_req()},
          {"GenerateSpeed", m.best().generate_speed()},
          {"GenerateSpeedPerClient", m.best().generate_speed_per_client()}};
}

nlohmann::json CampaignJson(const Campaign& c) {
  nlohmann::json j = {{"id", c.id()},
                      {"name", c.spec().name()},
                      {"state", CampaignStateName(c.state())},
                      {"reason", c.reason()},
                      {"cancel_requested", c.cancel_requested()},
                      {"created", controller::FormatTimestamp(c.created())},
                      {"started", controller::FormatTimestamp(c.started())},
                      {"finished", controller::FormatTimestamp(c.finished())},
                      {"models", nlohmann::json::array()}};
  for (const auto& m : c.models()) {
    j["models"].push_back({{"model", m.model()},
                           {"trials_done", m.trials_done()},
                           {"trials_planned", m.trials_planned()},
                           {"trials_failed", m.trials_failed()},
                           {"best", BestJson(m)},
                           {"current_point", m.current_point()},
                           {"range", {m.range_lo(), m.range_hi()}},
                           {"npuBlockNum", m.npu_block_num()},
                           {"done", m.done()},
                           {"activity", m.activity()}});
  }
  return j;
}

std::string ModelLine(const crest::v1::ModelProgress& m) {
  std::string best =
      m.has_best() ? absl::StrFormat("best %d @ %.1f tok/s", m.best().parameters().max_batch_size(),
                                     m.best().generate_speed())
                   : "best -";
  std::string range =
      m.range_hi() > 0 ? absl::StrFormat("range [%d, %d]", m.range_lo(), m.range_hi()) : "range ?";
  return absl::StrFormat("%-16s trials %u/%s  %s  %s  %s", m.model(), m.trials_done(),
                         m.trials_planned() > 0 ? absl::StrCat(m.trials_planned()) : "?", best,
                         range, m.activity());
}

std::string Bar(const crest::v1::ModelProgress& m, int width) {
  double frac = m.done() ? 1.0
                : m.trials_planned() > 0
                    ? std::min(1.0, static_cast<double>(m.trials_done()) / m.trials_planned())
                    : 0.0;
  int filled = static_cast<int>(std::lround(frac * width));
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '-'), "]");
}

// Columns of the terminal on stdout (80 when it does not say).
int TerminalColumns() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

// One line of the live view cut to the terminal: a wrapped line would throw
// off the cursor-up count that redraws the view in place.
std::string FitLine(const std::string& line, int columns) {
  if (static_cast<int>(line.size()) < columns) return line;
  return line.substr(0, std::max(0, columns - 1));
}

std::string CampaignText(const Campaign& c) {
  std::string out = absl::StrCat(
      "campaign ", c.id(), " (", c.spec().name(), "): ", CampaignStateName(c.state()),
      c.cancel_requested() && c.state() == crest::v1::CAMPAIGN_RUNNING ? " (cancelling)" : "",
      c.reason().empty() ? "" : absl::StrCat(" - ", c.reason()), "\n");
  for (const auto& m : c.models()) absl::StrAppend(&out, "  ", ModelLine(m), "\n");
  return out;
}

bool IsFinal(crest::v1::CampaignState s) {
  return s == crest::v1::CAMPAIGN_SUCCEEDED || s == crest::v1::CAMPAIGN_FAILED ||
         s == crest::v1::CAMPAIGN_CANCELLED;
}

int Submit(const CommonFlags& flags, const std::string& file) {
  auto text = ReadFileToString(file);
  if (!text.ok()) return Fail(absl::StrCat("-f ", file, ": ", text.status().message()));
  controller::ParsedSpec parsed = controller::ParseAndValidateCampaignSpec(*text);
  if (!parsed.problems.empty()) {
    return Fail(absl::StrCat(file, ": ", controller::FormatProblems(parsed.problems, file)));
  }
  auto stub = Connect(flags);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  grpc::ClientContext ctx;
  SetDeadline(&ctx, kCallTimeout);
  crest::v1::CreateCampaignRequest req;
  *req.mutable_spec() = parsed.spec;
  Campaign reply;
  grpc::Status s = (*stub)->CreateCampaign(&ctx, req, &reply);
  if (!s.ok()) return RpcFail(flags, s);
  // Allowed but worth knowing (e.g. few requests per client): in the JSON,
  // else on stderr, so stdout stays the campaign id alone.
  if (flags.output != "json") {
    for (const std::string& w : reply.warnings()) std::cerr << "warning: " << w << "\n";
  }
  if (flags.output == "json") {
    nlohmann::json j = {{"id", reply.id()}};
    if (reply.warnings_size() > 0) {
      j["warnings"] = std::vector<std::string>(reply.warnings().begin(), reply.warnings().end());
    }
    std::cout << j.dump() << "\n";
  } else {
    std::cout << reply.id() << "\n";
  }
  return 0;
}

int List(const CommonFlags& flags) {
  auto stub = Connect(flags);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  grpc::ClientContext ctx;
  SetDeadline(&ctx, kCallTimeout);
  crest::v1::ListCampaignsReply reply;
  grpc::Status s = (*stub)->ListCampaigns(&ctx, {}, &reply);
  if (!s.ok()) return RpcFail(flags, s);
  if (flags.output == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& c : reply.campaigns()) j.push_back(CampaignJson(c));
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::cout << absl::StrFormat("%-8s %-24s %-10s %s\n", "ID", "NAME", "STATE", "CREATED");
  for (const auto& c : reply.campaigns()) {
    std::cout << absl::StrFormat("%-8s %-24s %-10s %s\n", c.id(), c.spec().name(),
                                 CampaignStateName(c.state()),
                                 controller::FormatTimestamp(c.created()));
  }
  return 0;
}

int Status(const CommonFlags& flags, const std::string& id) {
  auto stub = Connect(flags);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  grpc::ClientContext ctx;
  SetDeadline(&ctx, kCallTimeout);
  crest::v1::GetCampaignRequest req;
  req.set_id(id);
  Campaign c;
  grpc::Status s = (*stub)->GetCampaign(&ctx, req, &c);
  if (!s.ok()) return RpcFail(flags, s);
  if (flags.output == "json") {
    std::cout << CampaignJson(c).dump(2) << "\n";
  } else {
    std::cout << CampaignText(c);
  }
  return 0;
}

int Cancel(const CommonFlags& flags, const std::string& id) {
  auto stub = Connect(flags);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  grpc::ClientContext ctx;
  SetDeadline(&ctx, kCallTimeout);
  crest::v1::CancelCampaignRequest req;
  req.set_id(id);
  Campaign c;
  grpc::Status s = (*stub)->CancelCampaign(&ctx, req, &c);
  if (!s.ok()) return RpcFail(flags, s);
  if (flags.output == "json") {
    std::cout << CampaignJson(c).dump(2) << "\n";
  } else if (IsFinal(c.state())) {
    std::cout << "campaign " << id << " already ended: " << CampaignStateName(c.state()) << "\n";
  } else {
    std::cout << "campaign " << id
              << ": cancelling (running trials stop, hosts are restored; see crest campaign "
                 "watch)\n";
  }
  return 0;
}

// Live view: progress bars redrawn in place on a terminal, plain lines otherwise.
int Watch(const CommonFlags& flags, const std::string& id, absl::Duration timeout) {
  auto stub = Connect(flags);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  const bool tty = isatty(STDOUT_FILENO) != 0;
  absl::Time deadline = absl::Now() + timeout;
  int drawn = 0;
  std::map<std::string, std::string> last;
  std::string last_state;
  absl::Time unavailable_since = absl::InfiniteFuture();
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline));
    crest::v1::WatchCampaignRequest req;
    req.set_id(id);
    auto reader = (*stub)->WatchCampaign(&ctx, req);
    Campaign c;
    bool ended = false;
    while (reader->Read(&c)) {
      unavailable_since = absl::InfiniteFuture();
      ended = IsFinal(c.state());
      if (tty) {
        std::string frame;
        const int columns = TerminalColumns();
        if (drawn > 0) absl::StrAppend(&frame, "\x1b[", drawn, "A");
        absl::StrAppend(&frame, "\x1b[2K",
                        FitLine(absl::StrCat("campaign ", c.id(), " (", c.spec().name(),
                                             "): ", CampaignStateName(c.state())),
                                columns),
                        "\n");
        for (const auto& m : c.models()) {
          std::string best = m.has_best() ? absl::StrFormat("best %d @ %.1f tok/s",
                                                            m.best().parameters().max_batch_size(),
                                                            m.best().generate_speed())
                                          : "best -";
          std::string now = m.done()                ? "done"
                            : m.current_point() > 0 ? absl::StrCat("now ", m.current_point())
                                                    : "";
          absl::StrAppend(
              &frame, "\x1b[2K",
              FitLine(
                  absl::StrFormat("  %-14s %s %u/%s  %-26s %-10s %s", m.model(), Bar(m, 20),
                                  m.trials_done(),
                                  m.trials_planned() > 0 ? absl::StrCat(m.trials_planned()) : "?",
                                  best, now, m.activity().substr(0, 60)),
                  columns),
              "\n");
        }
        drawn = 1 + c.models_size();
        std::cout << frame << std::flush;
      } else {
        std::string state = CampaignStateName(c.state());
        if (state != last_state) {
          std::cout << "campaign " << c.id() << ": " << state
                    << (c.reason().empty() ? "" : " - " + c.reason()) << std::endl;
          last_state = state;
        }
        for (const auto& m : c.models()) {
          // One line per real change: request counts alone do not make a new line.
          std::string line = ModelLine(m);
          std::string key = line.substr(0, line.rfind(" requests)"));
          key = key.substr(0, key.rfind(" ("));
          if (last[m.model()] != key) {
            std::cout << "  " << line << std::endl;
            last[m.model()] = key;
          }
        }
      }
      if (ended) {
        if (tty && !c.reason().empty()) std::cout << "  " << c.reason() << "\n";
        return c.state() == crest::v1::CAMPAIGN_SUCCEEDED ? 0 : 1;
      }
    }
    grpc::Status s = reader->Finish();
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return RpcFail(flags, s);
    // The controller went away (e.g. a restart): reconnect for up to a minute.
    if (unavailable_since == absl::InfiniteFuture()) unavailable_since = absl::Now();
    if (absl::Now() - unavailable_since > absl::Minutes(1)) return RpcFail(flags, s);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // reconnect back-off
  }
}

int Report(const CommonFlags& flags, const std::string& id, const std::string& format,
           const std::string& out_file, const std::string& practice_id) {
  if (!practice_id.empty() && format != "html") {
    return Fail(absl::StrCat("--practice ", practice_id,
                             ": marks the practice's answer on the HTML report's curves; it needs "
                             "--format html, not ",
                             format));
  }
  auto stub = Connect(flags);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  auto fetch = [&](const std::string& campaign_id, crest::v1::CampaignReport* out) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kCallTimeout);
    crest::v1::GetCampaignReportRequest req;
    req.set_id(campaign_id);
    return (*stub)->GetCampaignReport(&ctx, req, out);
  };
  crest::v1::CampaignReport report;
  if (grpc::Status s = fetch(id, &report); !s.ok()) return RpcFail(flags, s);
  std::string text;
  if (format == "html") {
    // The campaign too: its host settings and times are not in the report.
    grpc::ClientContext get_ctx;
    SetDeadline(&get_ctx, kCallTimeout);
    crest::v1::GetCampaignRequest get;
    get.set_id(id);
    Campaign campaign;
    grpc::Status got = (*stub)->GetCampaign(&get_ctx, get, &campaign);
    if (!got.ok()) return RpcFail(flags, got);
    controller::HtmlReportInput input;
    input.report = report;
    input.campaign = &campaign;
    if (!practice_id.empty()) {
      // The practice's ladder run as its own campaign on the same nodes:
      // its answer per model is drawn beside Crest's.
      crest::v1::CampaignReport practice;
      if (grpc::Status s = fetch(practice_id, &practice); !s.ok()) return RpcFail(flags, s);
      for (const auto& m : practice.models()) {
        if (m.has_best() && m.best().parameters().max_batch_size() > 0) {
          input.practice_max_batch_size[m.model()] = m.best().parameters().max_batch_size();
        }
      }
    }
    text = controller::ReportToHtml(input);
  } else if (format == "json") {
    text = controller::ReportToJson(report).dump(2) + "\n";
  } else if (format == "csv") {
    text = controller::ReportToCsv(report);
  } else {
    text = controller::ReportToTable(report);
  }
  if (out_file.empty()) {
    std::cout << text;
    return 0;
  }
  if (auto w = WriteFileAtomically(out_file, text); !w.ok()) {
    return Fail(absl::StrCat("-o ", out_file, ": ", w.message()));
  }
  return 0;
}

int Agents(const CommonFlags& flags) {
  auto stub = Connect(flags);
  if (!stub.ok()) return Fail(std::string(stub.status().message()));
  grpc::ClientContext ctx;
  SetDeadline(&ctx, kCallTimeout);
  crest::v1::ListAgentsReply reply;
  grpc::Status s = (*stub)->ListAgents(&ctx, {}, &reply);
  if (!s.ok()) return RpcFail(flags, s);
  if (flags.output == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& a : reply.agents()) {
      j.push_back(
          {{"node", a.node_name()},
           {"address", a.address()},
           {"state", a.state() == crest::v1::AGENT_READY ? "ready" : "lost"},
           {"static", a.static_()},
           {"labels", std::map<std::string, std::string>(a.labels().begin(), a.labels().end())},
           {"running_trial", a.running_trial()}});
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  for (const auto& a : reply.agents()) {
    std::cout << absl::StrFormat("%-16s %-22s %-6s %s\n", a.node_name(), a.address(),
                                 a.state() == crest::v1::AGENT_READY ? "ready" : "lost",
                                 a.running_trial());
  }
  return 0;
}

}  // namespace

void AddCampaignCommands(CLI::App& crest, Action* action) {
  CLI::App* group = crest.add_subcommand("campaign", "Run and inspect tuning campaigns");
  group->require_subcommand(1);

  auto* submit = group->add_subcommand("submit", "Validate a campaign spec and queue it");
  auto submit_flags = std::make_shared<CommonFlags>();
  auto file = std::make_shared<std::string>();
  submit->add_option("-f,--file", *file, "Campaign spec (YAML)")->required();
  AddCommon(submit, submit_flags.get(), true);
  submit->callback([=] { *action = [=] { return Submit(*submit_flags, *file); }; });

  auto* list = group->add_subcommand("list", "List campaigns");
  auto list_flags = std::make_shared<CommonFlags>();
  AddCommon(list, list_flags.get(), true);
  list->callback([=] { *action = [=] { return List(*list_flags); }; });

  auto* status = group->add_subcommand("status", "Show one campaign's state and progress");
  auto status_flags = std::make_shared<CommonFlags>();
  auto status_id = std::make_shared<std::string>();
  status->add_option("ID", *status_id, "Campaign id")->required();
  AddCommon(status, status_flags.get(), true);
  status->callback([=] { *action = [=] { return Status(*status_flags, *status_id); }; });

  auto* watch = group->add_subcommand("watch", "Follow a campaign live until it ends");
  auto watch_flags = std::make_shared<CommonFlags>();
  auto watch_id = std::make_shared<std::string>();
  auto watch_timeout = std::make_shared<double>(24 * 3600);
  watch->add_option("ID", *watch_id, "Campaign id")->required();
  watch->add_option("--timeout", *watch_timeout, "Give up after this many seconds")
      ->check(CLI::PositiveNumber);
  AddCommon(watch, watch_flags.get(), false);
  watch->callback([=] {
    *action = [=] { return Watch(*watch_flags, *watch_id, absl::Seconds(*watch_timeout)); };
  });

  auto* cancel = group->add_subcommand("cancel", "Stop a campaign's trials and restore its hosts");
  auto cancel_flags = std::make_shared<CommonFlags>();
  auto cancel_id = std::make_shared<std::string>();
  cancel->add_option("ID", *cancel_id, "Campaign id")->required();
  AddCommon(cancel, cancel_flags.get(), true);
  cancel->callback([=] { *action = [=] { return Cancel(*cancel_flags, *cancel_id); }; });

  auto* report = group->add_subcommand("report", "Print or write a campaign's report");
  auto report_flags = std::make_shared<CommonFlags>();
  auto report_id = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("table");
  auto out_file = std::make_shared<std::string>();
  auto practice_id = std::make_shared<std::string>();
  report->add_option("ID", *report_id, "Campaign id")->required();
  report->add_option("--format", *format, "table (default), json, csv or html")
      ->check(CLI::IsMember({"table", "json", "csv", "html"}));
  report->add_option("-o,--out", *out_file, "Write to this file instead of stdout");
  report->add_option("--practice", *practice_id,
                     "With --format html: a campaign that ran the practice's ladder "
                     "(strategy: practice) on the same nodes; its answer per model is marked on "
                     "the curves beside Crest's");
  AddCommon(report, report_flags.get(), false);
  report->callback([=] {
    *action = [=] { return Report(*report_flags, *report_id, *format, *out_file, *practice_id); };
  });

  auto* agents = group->add_subcommand("agents", "List the agents the controller knows");
  auto agents_flags = std::make_shared<CommonFlags>();
  AddCommon(agents, agents_flags.get(), true);
  agents->callback([=] { *action = [=] { return Agents(*agents_flags); }; });
}

}  // namespace crest::cli
