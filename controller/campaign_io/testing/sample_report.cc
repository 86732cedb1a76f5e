#include "controller/campaign_io/testing/sample_report.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace crest::controller::testing {
namespace {

constexpr int64_t kStart = 1'800'000'000;

crest::v1::Trial* AddTrial(crest::v1::ModelReport* m, int64_t batch, crest::v1::TrialStatus status,
                           double speed, int* n) {
  auto* t = m->add_trials();
  t->set_id(absl::StrCat("c7-t", ++*n));
  t->set_campaign_id("c7");
  t->set_model(m->model());
  t->set_node(*n % 2 == 0 ? "node-2" : "node-1");
  t->set_status(status);
  t->set_attempt(1);
  auto* p = t->mutable_parameters();
  p->set_max_batch_size(batch);
  p->set_max_prefill_batch_size(batch / 2);
  p->set_concurrency(static_cast<uint32_t>(batch - 1));
  t->mutable_started()->set_seconds(kStart + 60L * *n);
  t->mutable_finished()->set_seconds(kStart + 60L * *n + 45);
  if (status == crest::v1::TRIAL_OK) {
    auto* r = t->mutable_result();
    r->set_generate_speed(speed);
    r->set_generate_speed_per_client(speed / static_cast<double>(batch - 1));
    r->mutable_first_token_time()->set_average_ms(120);
    r->mutable_first_token_time()->set_p99_ms(480);
    r->mutable_decode_time()->set_average_ms(38);
    r->mutable_decode_time()->set_p99_ms(71);
    r->set_succeeded(1000);
  }
  return t;
}

}  // namespace

crest::v1::CampaignReport SampleReport() {
  crest::v1::CampaignReport r;
  r.set_id("c7");
  r.set_name("nightly <tuning>");
  r.set_state(crest::v1::CAMPAIGN_SUCCEEDED);
  int n = 0;
  auto* m = r.add_models();
  m->set_model("LLaMa3-8B");
  auto* cal = AddTrial(m, 435, crest::v1::TRIAL_OK, 2701.0, &n);
  cal->set_calibration(true);
  for (auto [batch, speeds] : std::vector<std::pair<int64_t, std::vector<double>>>{
           {435, {2845.3, 2861.0}}, {500, {2980.3, 2950.1}}, {600, {2520.6, 2611.4}}}) {
    for (size_t i = 0; i < speeds.size(); ++i) {
      auto* t = AddTrial(m, batch, crest::v1::TRIAL_OK, speeds[i], &n);
      t->set_repeat(static_cast<uint32_t>(i));
      t->mutable_parameters()->set_support_select_batch(true);
      t->mutable_parameters()->set_prefill_time_ms_per_req(120);
      t->mutable_parameters()->set_decode_time_ms_per_req(38);
      if (batch == 600) t->mutable_result()->mutable_daemon()->set_preemptions(37);
    }
  }
  auto* oom = AddTrial(m, 700, crest::v1::TRIAL_INFEASIBLE, 0, &n);
  oom->set_reason("out of memory: <NPU> 'HBM' & more");
  auto* best = m->mutable_best();
  *best->mutable_parameters() = m->trials(3).parameters();
  best->set_generate_speed((2980.3 + 2950.1) / 2);
  best->set_generate_speed_per_client(best->generate_speed() / 499);

  auto* m2 = r.add_models();
  m2->set_model("LLaMa2-13B");
  for (auto [batch, speed] :
       std::vector<std::pair<int64_t, double>>{{362, 1710.2}, {462, 1802.9}}) {
    AddTrial(m2, batch, crest::v1::TRIAL_OK, speed, &n);
  }
  auto* failed = AddTrial(m2, 562, crest::v1::TRIAL_FAILED, 0, &n);
  failed->set_reason("daemon exited with code 1 before `Daemon start success!`");
  *m2->mutable_best()->mutable_parameters() = m2->trials(1).parameters();
  m2->mutable_best()->set_generate_speed(1802.9);
  return r;
}

crest::v1::Campaign SampleCampaign() {
  crest::v1::Campaign c;
  c.set_id("c7");
  c.mutable_spec()->set_name("nightly <tuning>");
  c.mutable_spec()->mutable_host()->set_governor("performance");
  c.mutable_spec()->mutable_host()->set_thp("always");
  c.mutable_spec()->mutable_host()->mutable_pin()->set_mode(crest::v1::PINNING_ODD_NUMA);
  c.set_state(crest::v1::CAMPAIGN_SUCCEEDED);
  c.mutable_created()->set_seconds(kStart);
  c.mutable_started()->set_seconds(kStart + 2);
  c.mutable_finished()->set_seconds(kStart + int64_t{60} * 13);
  return c;
}

int SampleOkTrials() { return 1 + 6 + 2; }

}  // namespace crest::controller::testing
