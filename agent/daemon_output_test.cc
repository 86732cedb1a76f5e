#include "agent/daemon_output.h"

#include <optional>

#include "gtest/gtest.h"

namespace crest::agent {
namespace {

TEST(ParseKCacheBlocksTest, Forms) {
  EXPECT_EQ(ParseKCacheBlocks("<<<<<<< ori k_caches[0].shape=torch.Size([2175, 128, 8, 128])"),
            2175);
  EXPECT_EQ(ParseKCacheBlocks("k_caches[0].shape=torch.Size([])"), std::nullopt);
  // Found by tests/fuzz/npu_block_log_fuzzer: zero blocks is no cache size.
  EXPECT_EQ(ParseKCacheBlocks("k_caches[0].shape=torch.Size([0, 128, 8, 128])"), std::nullopt);
  EXPECT_EQ(ParseKCacheBlocks("k_caches[0].shape=torch.Size([99999999999999999999, 1])"),
            std::nullopt);
  EXPECT_EQ(ParseKCacheBlocks("nothing here"), std::nullopt);
}

// Out-of-memory lines in any case (mindie-sim prints "NPU out of memory: ...");
// a line that only mentions memory is not a failure.
TEST(DaemonOutputTest, OutOfMemory) {
  EXPECT_TRUE(IsOutOfMemory("RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB"));
  EXPECT_TRUE(IsOutOfMemory("[ERROR] OutOfMemory while allocating the KV cache"));
  EXPECT_TRUE(IsOutOfMemory("OUT OF MEMORY"));
  EXPECT_FALSE(IsOutOfMemory("npuMemSize=8 GiB, memory in use 40%"));
  EXPECT_FALSE(IsOutOfMemory(""));
}

TEST(DaemonOutputTest, ConfigError) {
  EXPECT_TRUE(IsConfigError("Invalid config: maxPrefillTokens must be >= maxSeqLen"));
  EXPECT_TRUE(IsConfigError("[ERROR] failed to load config.json"));
  EXPECT_FALSE(IsConfigError("loaded config from /opt/mindie/conf/config.json"));
  EXPECT_FALSE(IsConfigError("[ERROR] connection reset by peer"));
}

}  // namespace
}  // namespace crest::agent
