#include "controller/store.h"

#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

#include "common/file_util.h"
#include "common/status.h"

namespace crest::controller {
namespace {

// Ordered migrations: entry i takes the schema from version i to i + 1.
const std::vector<std::string>& Migrations() {
  static const auto* migrations = new std::vector<std::string>{
      // 0 -> 1: the tables.
      "CREATE TABLE campaigns (id TEXT PRIMARY KEY, number INTEGER NOT NULL, state INTEGER NOT "
      "NULL, data BLOB NOT NULL);"
      "CREATE TABLE trials (id TEXT PRIMARY KEY, campaign_id TEXT NOT NULL, number INTEGER NOT "
      "NULL, status INTEGER NOT NULL, data BLOB NOT NULL);"
      "CREATE TABLE model_state (campaign_id TEXT NOT NULL, model TEXT NOT NULL, data TEXT NOT "
      "NULL, PRIMARY KEY (campaign_id, model));"
      "CREATE TABLE tuned_nodes (campaign_id TEXT NOT NULL, node TEXT NOT NULL, restored INTEGER "
      "NOT NULL DEFAULT 0, PRIMARY KEY (campaign_id, node));"
      "CREATE TABLE agents (name TEXT PRIMARY KEY, data BLOB NOT NULL);",
      // 1 -> 2: trials are read per campaign in creation order.
      "CREATE INDEX trials_by_campaign ON trials (campaign_id, number);",
  };
  return *migrations;
}

absl::Status SqlError(sqlite3* db, absl::string_view what) {
  return absl::InternalError(absl::StrCat("sqlite ", what, ": ", sqlite3_errmsg(db)));
}

// RAII prepared statement.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) stmt_ = nullptr;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  bool ok() const { return stmt_ != nullptr; }
  void Bind(int i, const std::string& s) {
    sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void BindBlob(int i, const std::string& s) {
    sqlite3_bind_blob(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  int Step() { return sqlite3_step(stmt_); }
  std::string Text(int i) {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, i));
    return p == nullptr ? "" : std::string(p, sqlite3_column_bytes(stmt_, i));
  }
  int64_t Int(int i) { return sqlite3_column_int64(stmt_, i); }
  absl::Status Run(absl::string_view what) {
    if (!ok()) return SqlError(db_, absl::StrCat("prepare ", what));
    int rc = Step();
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) return SqlError(db_, what);
    return absl::OkStatus();
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

std::string ModelStateToJson(const ModelState& m) {
  nlohmann::json j = {{"npu_block_num", m.npu_block_num},
                      {"probe_node", m.probe_node},
                      {"done", m.done},
                      {"done_reason", m.done_reason}};
  if (!m.prior_profile.empty() || !m.prior_note.empty()) {
    j["prior_profile"] = m.prior_profile;
    j["prior_source"] = m.prior_source;
    j["prior_block_num"] = m.prior_block_num;
    j["prior_peak"] = m.prior_peak;
    j["prior_note"] = m.prior_note;
    j["prior_curve"] = m.prior_curve;
  }
  return j.dump();
}

ModelState ModelStateFromJson(const std::string& text) {
  ModelState m;
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return m;
  m.npu_block_num = j.value("npu_block_num", int64_t{0});
  m.probe_node = j.value("probe_node", std::string());
  m.done = j.value("done", false);
  m.done_reason = j.value("done_reason", std::string());
  m.prior_profile = j.value("prior_profile", std::string());
  m.prior_source = j.value("prior_source", std::string());
  m.prior_block_num = j.value("prior_block_num", int64_t{0});
  m.prior_peak = j.value("prior_peak", int64_t{0});
  m.prior_note = j.value("prior_note", std::string());
  if (auto it = j.find("prior_curve"); it != j.end() && it->is_array()) {
    for (const auto& point : *it) {
      if (point.is_array() && point.size() == 2 && point[0].is_number_integer() &&
          point[1].is_number()) {
        m.prior_curve.emplace_back(point[0].get<int64_t>(), point[1].get<double>());
      }
    }
  }
  return m;
}

int64_t NumberSuffix(const std::string& id) {
  auto pos = id.find_last_not_of("0123456789");
  std::string digits = pos == std::string::npos ? id : id.substr(pos + 1);
  return digits.empty() ? 0 : std::stoll(digits);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& dir) {
  return OpenAtVersionForTest(dir, kSchemaVersion);
}

absl::StatusOr<std::unique_ptr<Store>> Store::OpenAtVersionForTest(const std::string& dir,
                                                                   int version) {
  CREST_RETURN_IF_ERROR(Annotate(MakeDirectories(dir), "--state-dir"));
  std::string path = dir + "/controller.db";
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    absl::Status s = absl::UnavailableError(absl::StrCat(
        "cannot open ", path, ": ", db == nullptr ? "out of memory" : sqlite3_errmsg(db)));
    sqlite3_close(db);
    return s;
  }
  std::unique_ptr<Store> store(new Store(db, path));
  sqlite3_busy_timeout(db, 5000);
  // WAL + synchronous=FULL: a committed transaction survives kill -9 and power loss.
  CREST_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL;"));
  CREST_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL;"));
  CREST_RETURN_IF_ERROR(store->Migrate(version));
  return store;
}

Store::~Store() { sqlite3_close(db_); }

absl::Status Store::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    absl::Status s = absl::InternalError(absl::StrCat("sqlite: ", err ? err : "?", " in: ", sql));
    sqlite3_free(err);
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Store::SchemaVersion() {
  absl::MutexLock lock(&mu_);
  Statement st(db_, "SELECT version FROM schema_version");
  if (!st.ok()) return SqlError(db_, "read schema_version");
  if (st.Step() != SQLITE_ROW) return 0;
  return static_cast<int>(st.Int(0));
}

absl::Status Store::Migrate(int target) {
  CREST_RETURN_IF_ERROR(Exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER);"));
  int current = 0;
  {
    Statement st(db_, "SELECT version FROM schema_version");
    if (!st.ok()) return SqlError(db_, "read schema_version");
    if (st.Step() == SQLITE_ROW) current = static_cast<int>(st.Int(0));
  }
  if (current > kSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, " has schema version ", current, " but this crest-controller knows ",
                     kSchemaVersion, " at most (use a newer build)"));
  }
  const auto& migrations = Migrations();
  for (int v = current; v < target && v < static_cast<int>(migrations.size()); ++v) {
    // Each migration and its version bump commit together.
    CREST_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;"));
    absl::Status s = Exec(migrations[v]);
    if (s.ok()) s = Exec("DELETE FROM schema_version;");
    if (s.ok()) s = Exec(absl::StrCat("INSERT INTO schema_version VALUES (", v + 1, ");"));
    if (!s.ok()) {
      Exec("ROLLBACK;").IgnoreError();
      return Annotate(s, absl::StrCat("migrating ", path_, " to version ", v + 1));
    }
    CREST_RETURN_IF_ERROR(Exec("COMMIT;"));
  }
  return absl::OkStatus();
}

absl::Status Store::Apply(const Batch& batch) {
  if (batch.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  CREST_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE;"));
  auto body = [&]() -> absl::Status {
    for (const auto& c : batch.campaigns) {
      crest::v1::Campaign stored = c;
      stored.clear_models();
      Statement st(db_,
                   "INSERT INTO campaigns (id, number, state, data) VALUES (?1, ?2, ?3, ?4) "
                   "ON CONFLICT(id) DO UPDATE SET state = ?3, data = ?4");
      st.Bind(1, c.id());
      st.Bind(2, NumberSuffix(c.id()));
      st.Bind(3, static_cast<int64_t>(c.state()));
      st.BindBlob(4, stored.SerializeAsString());
      CREST_RETURN_IF_ERROR(st.Run("write campaign"));
    }
    for (const auto& t : batch.trials) {
      {
        Statement st(db_, "SELECT status FROM trials WHERE id = ?1");
        if (!st.ok()) return SqlError(db_, "read trial");
        st.Bind(1, t.id());
        if (st.Step() == SQLITE_ROW) {
          auto old = static_cast<crest::v1::TrialStatus>(st.Int(0));
          if (IsFinal(old)) {
            return absl::FailedPreconditionError(
                absl::StrCat("trial ", t.id(), " is final (", crest::v1::TrialStatus_Name(old),
                             ") and cannot become ", crest::v1::TrialStatus_Name(t.status())));
          }
        }
      }
      Statement st(db_,
                   "INSERT INTO trials (id, campaign_id, number, status, data) VALUES (?1, ?2, "
                   "?3, ?4, ?5) ON CONFLICT(id) DO UPDATE SET status = ?4, data = ?5");
      st.Bind(1, t.id());
      st.Bind(2, t.campaign_id());
      st.Bind(3, NumberSuffix(t.id()));
      st.Bind(4, static_cast<int64_t>(t.status()));
      st.BindBlob(5, t.SerializeAsString());
      CREST_RETURN_IF_ERROR(st.Run("write trial"));
    }
    for (const auto& [key, m] : batch.models) {
      Statement st(db_,
                   "INSERT INTO model_state (campaign_id, model, data) VALUES (?1, ?2, ?3) "
                   "ON CONFLICT(campaign_id, model) DO UPDATE SET data = ?3");
      st.Bind(1, key.campaign);
      st.Bind(2, key.model);
      st.Bind(3, ModelStateToJson(m));
      CREST_RETURN_IF_ERROR(st.Run("write model state"));
    }
    for (const auto& [campaign, node] : batch.tuned) {
      Statement st(db_,
                   "INSERT INTO tuned_nodes (campaign_id, node, restored) VALUES (?1, ?2, 0) "
                   "ON CONFLICT DO UPDATE SET restored = 0");
      st.Bind(1, campaign);
      st.Bind(2, node);
      CREST_RETURN_IF_ERROR(st.Run("write tuned node"));
    }
    for (const auto& [campaign, node] : batch.restored) {
      Statement st(db_, "UPDATE tuned_nodes SET restored = 1 WHERE campaign_id = ?1 AND node = ?2");
      st.Bind(1, campaign);
      st.Bind(2, node);
      CREST_RETURN_IF_ERROR(st.Run("write restored node"));
    }
    for (const auto& a : batch.agents) {
      Statement st(db_,
                   "INSERT INTO agents (name, data) VALUES (?1, ?2) "
                   "ON CONFLICT(name) DO UPDATE SET data = ?2");
      st.Bind(1, a.node_name());
      st.BindBlob(2, a.SerializeAsString());
      CREST_RETURN_IF_ERROR(st.Run("write agent"));
    }
    return absl::OkStatus();
  };
  absl::Status s = body();
  if (!s.ok()) {
    Exec("ROLLBACK;").IgnoreError();
    return s;
  }
  return Exec("COMMIT;");
}

absl::StatusOr<Snapshot> Store::Load() {
  absl::MutexLock lock(&mu_);
  Snapshot snap;
  std::map<std::string, size_t> index;
  {
    Statement st(db_, "SELECT id, data FROM campaigns ORDER BY number");
    if (!st.ok()) return SqlError(db_, "read campaigns");
    while (st.Step() == SQLITE_ROW) {
      StoredCampaign c;
      if (!c.campaign.ParseFromString(st.Text(1))) {
        return absl::DataLossError(absl::StrCat("campaign ", st.Text(0), " is unreadable"));
      }
      index[c.campaign.id()] = snap.campaigns.size();
      snap.campaigns.push_back(std::move(c));
    }
  }
  {
    Statement st(db_, "SELECT campaign_id, id, data FROM trials ORDER BY campaign_id, number");
    if (!st.ok()) return SqlError(db_, "read trials");
    while (st.Step() == SQLITE_ROW) {
      auto it = index.find(st.Text(0));
      if (it == index.end()) continue;
      crest::v1::Trial t;
      if (!t.ParseFromString(st.Text(2))) {
        return absl::DataLossError(absl::StrCat("trial ", st.Text(1), " is unreadable"));
      }
      snap.campaigns[it->second].trials.push_back(std::move(t));
    }
  }
  {
    Statement st(db_, "SELECT campaign_id, model, data FROM model_state");
    if (!st.ok()) return SqlError(db_, "read model state");
    while (st.Step() == SQLITE_ROW) {
      auto it = index.find(st.Text(0));
      if (it != index.end()) {
        snap.campaigns[it->second].models[st.Text(1)] = ModelStateFromJson(st.Text(2));
      }
    }
  }
  {
    Statement st(db_, "SELECT campaign_id, node, restored FROM tuned_nodes");
    if (!st.ok()) return SqlError(db_, "read tuned nodes");
    while (st.Step() == SQLITE_ROW) {
      auto it = index.find(st.Text(0));
      if (it == index.end()) continue;
      snap.campaigns[it->second].tuned.insert(st.Text(1));
      if (st.Int(2) != 0) snap.campaigns[it->second].restored.insert(st.Text(1));
    }
  }
  {
    Statement st(db_, "SELECT data FROM agents ORDER BY name");
    if (!st.ok()) return SqlError(db_, "read agents");
    while (st.Step() == SQLITE_ROW) {
      crest::v1::AgentInfo a;
      if (a.ParseFromString(st.Text(0))) snap.agents.push_back(std::move(a));
    }
  }
  return snap;
}

absl::StatusOr<int64_t> Store::NextCampaignNumber() {
  absl::MutexLock lock(&mu_);
  Statement st(db_, "SELECT COALESCE(MAX(number), 0) FROM campaigns");
  if (!st.ok() || st.Step() != SQLITE_ROW) return SqlError(db_, "read campaign numbers");
  return st.Int(0) + 1;
}

}  // namespace crest::controller
