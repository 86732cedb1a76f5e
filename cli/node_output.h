// What `crest node` prints of an agent's replies: proto JSON for --output
// json, and the human text. Plain functions returning strings.
#pragma once

#include <string>

#include "google/protobuf/message.h"

#include "crest/v1/agent.pb.h"

namespace crest::cli {

// Proto JSON (every field, defaults too) with the 64-bit counters as numbers,
// not the strings protobuf writes, so scripts compare npuBlockNum or
// restarts directly. Ends with a newline.
std::string ProtoJson(const google::protobuf::Message& message);

std::string NodeInfoText(const crest::v1::NodeInfo& info);
std::string HostTuningText(const crest::v1::HostTuningReply& reply);
// `crest node start`'s lines while the daemon starts, and its answer.
std::string DaemonStartingText(const crest::v1::DaemonStarting& starting);
std::string DaemonReadyText(const crest::v1::DaemonReady& ready);
std::string DaemonStopText(const crest::v1::StopDaemonReply& reply);
std::string DaemonStatusText(const crest::v1::DaemonStatus& status);
// One progress line, redrawn in place on stderr ("\r...").
std::string BenchmarkProgressText(const crest::v1::BenchmarkProgress& progress);
std::string BenchmarkResultText(const crest::v1::BenchmarkResult& result);

}  // namespace crest::cli
