// `crest campaign submit|list|status|watch|cancel|report|agents`: the
// operator's view of the controller. Specs are parsed and validated here
// first (every problem with its line), and again by the controller. The
// checks live in campaign_requests, the renderings in campaign_output; each
// command here only makes its calls.
#include <grpcpp/grpcpp.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/campaign_output.h"
#include "cli/campaign_requests.h"
#include "cli/commands.h"
#include "cli/rpc_client.h"

#include "common/curve_file.h"
#include "common/file_util.h"
#include "controller/campaign_io/report_curve.h"
#include "crest/v1/controller.grpc.pb.h"

namespace crest::cli {
namespace {

using crest::v1::Campaign;
using crest::v1::Controller;

// How long `watch` keeps trying while the controller is away (a restart).
constexpr absl::Duration kWatchReconnectFor = absl::Minutes(1);
constexpr auto kWatchReconnectBackOff = std::chrono::milliseconds(500);

// The flags every `crest campaign` command has.
struct CampaignFlags {
  Endpoint endpoint{kControllerPeer};
  OutputFormat output = OutputFormat::kText;
};

// Columns of the terminal on stdout (80 when it does not say).
int TerminalColumns() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

int Submit(const CampaignFlags& flags, const std::string& file) {
  auto spec = LoadCampaignSpec(file);
  if (!spec.ok()) return Fail(spec.status().message());
  auto client = RpcClient<Controller>::Open(flags.endpoint);
  if (!client.ok()) return Fail(client.status().message());
  crest::v1::CreateCampaignRequest req;
  *req.mutable_spec() = *spec;
  auto created =
      client->Call("campaign submit", kChangeTimeout, &Controller::Stub::CreateCampaign, req);
  if (!created.ok()) return Fail(created.status().message());
  // Allowed but worth knowing (e.g. few requests per client): in the JSON,
  // else on stderr, so stdout stays the campaign id alone.
  if (flags.output == OutputFormat::kJson) {
    std::cout << SubmitJson(*created);
    return 0;
  }
  for (const std::string& w : created->warnings()) std::cerr << "warning: " << w << "\n";
  std::cout << created->id() << "\n";
  return 0;
}

// One unary call, its reply printed as JSON or as `text` says.
template <typename Request, typename Reply>
int PrintCampaignCall(const CampaignFlags& flags, std::string call, absl::Duration timeout,
                      RpcClient<Controller>::Method<Request, Reply> method, const Request& request,
                      nlohmann::json (*json)(const Reply&), std::string (*text)(const Reply&)) {
  auto client = RpcClient<Controller>::Open(flags.endpoint);
  if (!client.ok()) return Fail(client.status().message());
  absl::StatusOr<Reply> reply = client->Call(std::move(call), timeout, method, request);
  if (!reply.ok()) return Fail(reply.status().message());
  std::cout << (flags.output == OutputFormat::kJson ? json(*reply).dump(2) + "\n" : text(*reply));
  return 0;
}

int StatusCommand(const CampaignFlags& flags, const std::string& id) {
  crest::v1::GetCampaignRequest req;
  req.set_id(id);
  return PrintCampaignCall(flags, "campaign status", kQueryTimeout, &Controller::Stub::GetCampaign,
                           req, &CampaignJson, &CampaignText);
}

int CancelCommand(const CampaignFlags& flags, const std::string& id) {
  crest::v1::CancelCampaignRequest req;
  req.set_id(id);
  return PrintCampaignCall(flags, "campaign cancel", kChangeTimeout,
                           &Controller::Stub::CancelCampaign, req, &CampaignJson, &CancelText);
}

// Live view: progress bars redrawn in place on a terminal, plain lines
// otherwise; exit 0 when the campaign succeeded. One deadline (--timeout)
// for the whole watch, reconnects included.
int Watch(const CampaignFlags& flags, const std::string& id) {
  auto client = RpcClient<Controller>::Open(flags.endpoint);
  if (!client.ok()) return Fail(client.status().message());
  const absl::Duration timeout = CallTimeout(flags.endpoint.timeout, kWatchTimeout);
  const absl::Time deadline = absl::Now() + timeout;
  WatchView view(isatty(STDOUT_FILENO) != 0);
  absl::Time unavailable_since = absl::InfiniteFuture();
  while (true) {
    RpcCall call(flags.endpoint, "campaign watch", deadline, timeout);
    crest::v1::WatchCampaignRequest req;
    req.set_id(id);
    auto reader = client->stub().WatchCampaign(call.context(), req);
    Campaign c;
    while (reader->Read(&c)) {
      unavailable_since = absl::InfiniteFuture();
      std::cout << view.Update(c, view.terminal() ? TerminalColumns() : 0) << std::flush;
      if (IsFinalState(c.state())) {
        std::cout << view.End(c) << std::flush;
        return c.state() == crest::v1::CAMPAIGN_SUCCEEDED ? 0 : 1;
      }
    }
    grpc::Status s = reader->Finish();
    if (s.ok()) {
      return Fail(absl::StrCat("campaign watch: the controller at ", flags.endpoint.address,
                               " ended the stream before campaign ", id, " ended"));
    }
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE) return call.Fail(s);
    // The controller went away (e.g. a restart): reconnect for a while.
    if (unavailable_since == absl::InfiniteFuture()) unavailable_since = absl::Now();
    if (absl::Now() - unavailable_since > kWatchReconnectFor) return call.Fail(s);
    std::this_thread::sleep_for(kWatchReconnectBackOff);
  }
}

// The report of `id`; HTML also needs the campaign (host settings and times)
// and, with --practice, the practice's answers.
absl::StatusOr<std::string> FetchReport(RpcClient<Controller>& client, const std::string& id,
                                        const std::string& format, const std::string& practice_id,
                                        const std::string& model) {
  crest::v1::GetCampaignReportRequest req;
  req.set_id(id);
  controller::HtmlReportInput input;
  CREST_ASSIGN_OR_RETURN(input.report, client.Call("campaign report", kQueryTimeout,
                                                   &Controller::Stub::GetCampaignReport, req));
  if (format != "html" && format != "curve") return RenderReport(format, input);
  crest::v1::GetCampaignRequest get;
  get.set_id(id);
  CREST_ASSIGN_OR_RETURN(Campaign campaign, client.Call("campaign report", kQueryTimeout,
                                                        &Controller::Stub::GetCampaign, get));
  if (format == "curve") {
    // The spec gives the curve its request shape and block size.
    CREST_ASSIGN_OR_RETURN(crest::ThroughputCurve curve,
                           controller::CurveOfModel(input.report, &campaign, model));
    return crest::CurveJson(curve);
  }
  input.campaign = &campaign;
  if (!practice_id.empty()) {
    // The practice's ladder run as its own campaign on the same nodes: its
    // answer per model is drawn beside Crest's.
    req.set_id(practice_id);
    CREST_ASSIGN_OR_RETURN(crest::v1::CampaignReport practice,
                           client.Call("campaign report --practice", kQueryTimeout,
                                       &Controller::Stub::GetCampaignReport, req));
    input.practice_max_batch_size = PracticeAnswers(practice);
  }
  return RenderReport(format, input);
}

int Report(const CampaignFlags& flags, const std::string& id, const std::string& format,
           const std::string& out_file, const std::string& practice_id, const std::string& model) {
  if (absl::Status checked = CheckReportFlags(format, practice_id, model); !checked.ok()) {
    return Fail(checked.message());
  }
  auto client = RpcClient<Controller>::Open(flags.endpoint);
  if (!client.ok()) return Fail(client.status().message());
  absl::StatusOr<std::string> text = FetchReport(*client, id, format, practice_id, model);
  if (!text.ok()) return Fail(text.status().message());
  if (out_file.empty()) {
    std::cout << *text;
    return 0;
  }
  if (auto w = WriteFileAtomically(out_file, *text); !w.ok()) {
    return Fail(absl::StrCat("-o ", out_file, ": ", w.message()));
  }
  return 0;
}

// A `crest campaign` subcommand with the common flags bound to `flags`;
// --output when the command prints a reply (watch draws, report has --format).
CLI::App* AddCampaignCommand(CLI::App* group, const std::string& name, const std::string& help,
                             CampaignFlags* flags, absl::Duration default_timeout, bool output) {
  CLI::App* cmd = group->add_subcommand(name, help);
  AddEndpointFlags(*cmd, &flags->endpoint, default_timeout);
  if (output) AddOutputFlag(*cmd, &flags->output);
  return cmd;
}

// The ID argument of the commands on one campaign.
std::shared_ptr<std::string> AddCampaignId(CLI::App* cmd) {
  auto id = std::make_shared<std::string>();
  cmd->add_option("ID", *id, "Campaign id")->required();
  return id;
}

}  // namespace

void AddCampaignCommands(CLI::App& crest, Action* action) {
  CLI::App* group = crest.add_subcommand("campaign", "Run and inspect tuning campaigns");
  group->require_subcommand(1);
  // The flag storage lives as long as the app (the action runs after parsing).
  auto f = std::make_shared<CampaignFlags>();

  CLI::App* submit = AddCampaignCommand(group, "submit", "Validate a campaign spec and queue it",
                                        f.get(), kChangeTimeout, true);
  auto file = std::make_shared<std::string>();
  submit->add_option("-f,--file", *file, "Campaign spec (YAML)")->required();
  submit->callback([=] { *action = [=] { return Submit(*f, *file); }; });

  AddCampaignCommand(group, "list", "List campaigns", f.get(), kQueryTimeout, true)->callback([=] {
    *action = [=] {
      return PrintCampaignCall(*f, "campaign list", kQueryTimeout, &Controller::Stub::ListCampaigns,
                               crest::v1::ListCampaignsRequest(), &ListJson, &ListText);
    };
  });

  CLI::App* status = AddCampaignCommand(group, "status", "Show one campaign's state and progress",
                                        f.get(), kQueryTimeout, true);
  auto status_id = AddCampaignId(status);
  status->callback([=] { *action = [=] { return StatusCommand(*f, *status_id); }; });

  CLI::App* watch = AddCampaignCommand(group, "watch", "Follow a campaign live until it ends",
                                       f.get(), kWatchTimeout, false);
  auto watch_id = AddCampaignId(watch);
  watch->callback([=] { *action = [=] { return Watch(*f, *watch_id); }; });

  CLI::App* cancel =
      AddCampaignCommand(group, "cancel", "Stop a campaign's trials and restore its hosts", f.get(),
                         kChangeTimeout, true);
  auto cancel_id = AddCampaignId(cancel);
  cancel->callback([=] { *action = [=] { return CancelCommand(*f, *cancel_id); }; });

  CLI::App* report = AddCampaignCommand(group, "report", "Print or write a campaign's report",
                                        f.get(), kQueryTimeout, false);
  auto report_id = AddCampaignId(report);
  auto format = std::make_shared<std::string>("table");
  auto out_file = std::make_shared<std::string>();
  auto practice_id = std::make_shared<std::string>();
  auto model = std::make_shared<std::string>();
  report
      ->add_option("--format", *format,
                   "table (default), json, csv, html, or curve (one model's curve file, which "
                   "search-bench --curve and mindie-sim --curve replay)")
      ->check(CLI::IsMember({"table", "json", "csv", "html", "curve"}));
  report->add_option("--model", *model,
                     "With --format curve: the model (needed when the campaign has several)");
  report->add_option("-o,--out", *out_file, "Write to this file instead of stdout");
  report->add_option("--practice", *practice_id,
                     "With --format html: a campaign that ran the practice's ladder "
                     "(strategy: practice) on the same nodes; its answer per model is marked on "
                     "the curves beside Crest's");
  report->callback([=] {
    *action = [=] { return Report(*f, *report_id, *format, *out_file, *practice_id, *model); };
  });

  AddCampaignCommand(group, "agents", "List the agents the controller knows", f.get(),
                     kQueryTimeout, true)
      ->callback([=] {
        *action = [=] {
          return PrintCampaignCall(*f, "campaign agents", kQueryTimeout,
                                   &Controller::Stub::ListAgents, crest::v1::ListAgentsRequest(),
                                   &AgentsJson, &AgentsText);
        };
      });
}

}  // namespace crest::cli
