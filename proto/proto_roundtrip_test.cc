// Every message of the crest.v1 contract survives binary and JSON encoding
// with every field set (filled through reflection, so new fields are covered
// without touching this test).
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "crest/v1/agent.pb.h"
#include "crest/v1/benchmark.pb.h"
#include "crest/v1/controller.pb.h"

namespace crest {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Sets every field of `m` (recursing to `depth`) to a value that differs from
// its default, so a field dropped by encoding shows up as a difference.
void Fill(Message* m, int depth, int* counter) {
  const Descriptor* d = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    // In a oneof only the last member set survives; set the first one only.
    if (f->containing_oneof() && f->index_in_oneof() != 0) continue;
    int v = ++*counter;
    if (f->is_map()) {
      Message* entry = r->AddMessage(m, f);
      Fill(entry, depth, counter);
      continue;
    }
    auto set_scalar = [&](bool repeated) {
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          repeated ? r->AddInt32(m, f, v) : r->SetInt32(m, f, v);
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          repeated ? r->AddInt64(m, f, v * 1000003LL) : r->SetInt64(m, f, v * 1000003LL);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          repeated ? r->AddUInt32(m, f, v) : r->SetUInt32(m, f, v);
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          repeated ? r->AddUInt64(m, f, v * 7ULL) : r->SetUInt64(m, f, v * 7ULL);
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          repeated ? r->AddDouble(m, f, v + 0.25) : r->SetDouble(m, f, v + 0.25);
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          repeated ? r->AddFloat(m, f, v + 0.5f) : r->SetFloat(m, f, v + 0.5f);
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          repeated ? r->AddBool(m, f, true) : r->SetBool(m, f, true);
          break;
        case FieldDescriptor::CPPTYPE_STRING:
          repeated ? r->AddString(m, f, "s" + std::to_string(v))
                   : r->SetString(m, f, "s" + std::to_string(v));
          break;
        case FieldDescriptor::CPPTYPE_ENUM: {
          const auto* e = f->enum_type();
          const auto* value = e->value(e->value_count() - 1);
          repeated ? r->AddEnum(m, f, value) : r->SetEnum(m, f, value);
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE:
          if (depth > 0) {
            Message* sub = repeated ? r->AddMessage(m, f) : r->MutableMessage(m, f);
            if (f->message_type()->full_name() == "google.protobuf.Timestamp") {
              sub->GetReflection()->SetInt64(sub, sub->GetDescriptor()->FindFieldByName("seconds"),
                                             1'800'000'000 + v);
            } else if (f->message_type()->full_name() == "google.protobuf.Duration") {
              sub->GetReflection()->SetInt64(sub, sub->GetDescriptor()->FindFieldByName("seconds"),
                                             v);
            } else {
              Fill(sub, depth - 1, counter);
            }
          }
          break;
      }
    };
    if (f->is_repeated()) {
      set_scalar(true);
      set_scalar(true);
    } else {
      set_scalar(false);
    }
  }
}

std::vector<const Descriptor*> AllMessages() {
  std::vector<const Descriptor*> out;
  for (const auto* file :
       {v1::NodeInfo::descriptor()->file(), v1::BenchmarkResult::descriptor()->file(),
        v1::Campaign::descriptor()->file()}) {
    for (int i = 0; i < file->message_type_count(); ++i) out.push_back(file->message_type(i));
  }
  return out;
}

TEST(ProtoRoundTrip, EveryMessageSurvivesBinaryAndJson) {
  google::protobuf::DynamicMessageFactory factory;
  std::vector<const Descriptor*> messages = AllMessages();
  ASSERT_GT(messages.size(), 40u);
  for (const Descriptor* d : messages) {
    SCOPED_TRACE(d->full_name());
    const Message* prototype =
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(d);
    ASSERT_NE(prototype, nullptr);
    std::unique_ptr<Message> original(prototype->New());
    int counter = 0;
    Fill(original.get(), 3, &counter);
    if (d->field_count() > 0) {
      EXPECT_GT(original->ByteSizeLong(), 0u) << "filling set nothing";
    }

    std::string wire;
    ASSERT_TRUE(original->SerializeToString(&wire));
    std::unique_ptr<Message> decoded(prototype->New());
    ASSERT_TRUE(decoded->ParseFromString(wire));
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*original, *decoded))
        << original->DebugString() << "\nvs\n"
        << decoded->DebugString();

    std::string json;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(*original, &json).ok());
    std::unique_ptr<Message> from_json(prototype->New());
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, from_json.get()).ok()) << json;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*original, *from_json)) << json;
  }
}

TEST(ProtoRoundTrip, OneofKeepsOnlyTheLastMember) {
  v1::ConfigOverride o;
  o.set_key("maxBatchSize");
  o.set_int_value(500);
  o.set_bool_value(true);
  v1::ConfigOverride back;
  ASSERT_TRUE(back.ParseFromString(o.SerializeAsString()));
  EXPECT_EQ(back.value_case(), v1::ConfigOverride::kBoolValue);
  EXPECT_FALSE(back.has_int_value());
}

TEST(ProtoRoundTrip, EnumsHaveAnUnspecifiedZero) {
  for (const auto* file :
       {v1::NodeInfo::descriptor()->file(), v1::BenchmarkResult::descriptor()->file(),
        v1::Campaign::descriptor()->file()}) {
    for (int i = 0; i < file->enum_type_count(); ++i) {
      const auto* e = file->enum_type(i);
      EXPECT_NE(e->value(0)->name().find("UNSPECIFIED"), std::string::npos) << e->full_name();
      EXPECT_EQ(e->value(0)->number(), 0) << e->full_name();
    }
  }
}

}  // namespace
}  // namespace crest
