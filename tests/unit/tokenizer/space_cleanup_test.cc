// clean_up_tokenization_spaces as llama.cpp applies it, and the cut points the streaming decoder
// relies on to clean text piece by piece.
#include "tokenizer/space_cleanup.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace drift {
namespace {

TEST(SpaceCleanup, DropsTheSpaceBeforeClausePunctuation) {
  EXPECT_EQ(clean_up_tokenization_spaces("Hi , there . Why ? No !"), "Hi, there. Why? No!");
  EXPECT_EQ(clean_up_tokenization_spaces(" ."), ".");
  EXPECT_EQ(clean_up_tokenization_spaces("a  ."), "a .");  // one space only
  EXPECT_EQ(clean_up_tokenization_spaces("a ; b"), "a ; b");
}

TEST(SpaceCleanup, JoinsALoneApostrophe) {
  EXPECT_EQ(clean_up_tokenization_spaces("rock ' n"), "rock'n");
  // The space after a joined apostrophe is gone, so the next " ' " does not match.
  EXPECT_EQ(clean_up_tokenization_spaces("a ' ' b"), "a'' b");
  EXPECT_EQ(clean_up_tokenization_spaces("end '"), "end '");
}

TEST(SpaceCleanup, AttachesSomeContractionsOnly) {
  EXPECT_EQ(clean_up_tokenization_spaces("it 's I 'm we 're you 've"), "it's I'm we're you've");
  EXPECT_EQ(clean_up_tokenization_spaces("don 't I 'd we 'll"), "don 't I 'd we 'll");
  EXPECT_EQ(clean_up_tokenization_spaces("x 'r"), "x 'r");  // too short to be " 're"
}

TEST(SpaceCleanup, LeavesOtherTextAlone) {
  EXPECT_EQ(clean_up_tokenization_spaces(""), "");
  EXPECT_EQ(clean_up_tokenization_spaces("plain text, with commas."), "plain text, with commas.");
  EXPECT_EQ(clean_up_tokenization_spaces("中文 。"), "中文 。");
}

// Cleaning the two sides of a boundary separately equals cleaning the whole, for every boundary
// the predicate accepts, on random text dense in the characters the rules look at.
TEST(SpaceCleanup, BoundariesSplitTheCleanUpExactly) {
  std::mt19937 rng(99);
  const std::string alphabet = " '.,?!smrevtdlx";
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::uniform_int_distribution<size_t> length(0, 14);
  int boundaries = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string text;
    for (size_t n = length(rng); n > 0; --n) text.push_back(alphabet[pick(rng)]);
    const std::string whole = clean_up_tokenization_spaces(text);
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      if (!is_space_cleanup_boundary(text, cut)) continue;
      ++boundaries;
      ASSERT_EQ(clean_up_tokenization_spaces(text.substr(0, cut)) +
                    clean_up_tokenization_spaces(text.substr(cut)),
                whole)
          << '"' << text << "\" cut at " << cut;
    }
  }
  EXPECT_GT(boundaries, 10000);
}

}  // namespace
}  // namespace drift
