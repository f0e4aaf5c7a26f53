// The byte bound on prompts: exact at its edges (one byte more is refused, the byte bound itself
// is not), and never below 4 bytes per token (an unknown character is one token).
#include "tokenizer/prompt_bound.h"

#include <gtest/gtest.h>

#include <limits>

namespace drift {
namespace {

TEST(PromptBound, MinTokensRoundsUp) {
  const PromptBound bound(10);
  EXPECT_EQ(bound.min_tokens(0), 0);
  EXPECT_EQ(bound.min_tokens(1), 1);
  EXPECT_EQ(bound.min_tokens(10), 1);
  EXPECT_EQ(bound.min_tokens(11), 2);
}

TEST(PromptBound, MaxBytesIsTheLastSizeThatMayFit) {
  const PromptBound bound(10);
  // A context of 5 leaves room for prompts of up to 4 tokens: 40 bytes may fit, 41 cannot.
  EXPECT_EQ(bound.max_bytes(5), 40u);
  EXPECT_EQ(bound.min_tokens(40), 4);
  EXPECT_EQ(bound.min_tokens(41), 5);
  EXPECT_EQ(bound.max_bytes(1), 0u);
  EXPECT_EQ(bound.max_bytes(0), 0u);
}

TEST(PromptBound, AtLeastFourBytesPerToken) {
  EXPECT_EQ(PromptBound(1).max_bytes_per_token(), 4u);
  EXPECT_EQ(PromptBound(0).max_bytes(3), 8u);
}

TEST(PromptBound, HugeContextsDoNotOverflow) {
  const PromptBound bound(std::numeric_limits<size_t>::max() / 2);
  EXPECT_EQ(bound.max_bytes(int64_t{1} << 40), std::numeric_limits<size_t>::max());
}

TEST(PromptBound, BytesTheTokenizerDropsAreNotCounted) {
  PromptBound bound(10);
  // A tokenizer that drops 0x04 (as SmolLM2's byte-level vocabulary does) and makes one token of
  // every other byte.
  bound.find_dropped_ascii([](const std::string& text) { return text == "\x04" ? 0u : 1u; });
  EXPECT_EQ(bound.counted_bytes("ab\x04\x04"
                                "c"),
            3u);
  EXPECT_EQ(bound.counted_bytes(std::string(100, '\x04')), 0u);
  EXPECT_EQ(bound.min_tokens(bound.counted_bytes(std::string(100, '\x04'))), 0);
  EXPECT_EQ(PromptBound(10).counted_bytes("ab\x04"), 3u) << "nothing dropped unless found";
}

}  // namespace
}  // namespace drift
