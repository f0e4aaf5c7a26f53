// The one fan-out of n choices (request.h) that the server and Python both use.
#include <gtest/gtest.h>

#include "engine/request.h"

namespace drift {
namespace {

TEST(FanOutChoices, ChoicesDifferOnlyBySeedPlusTheirIndex) {
  Request r;
  r.prompt = std::vector<TokenId>{5, 6, 7};
  r.max_tokens = 9;
  r.stop = {"x"};
  r.sampling.seed = 40;
  r.sampling.temperature = 0.5f;
  Expected<std::vector<Request>> choices = fan_out_choices(r, 3);
  ASSERT_TRUE(choices.ok()) << choices.error().message;
  ASSERT_EQ(choices->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const Request& c = (*choices)[i];
    EXPECT_EQ(c.sampling.seed, 40u + i);
    EXPECT_EQ(c.sampling.temperature, 0.5f);
    EXPECT_EQ(std::get<std::vector<TokenId>>(c.prompt), (std::vector<TokenId>{5, 6, 7}));
    EXPECT_EQ(c.max_tokens, 9);
    EXPECT_EQ(c.stop, std::vector<std::string>{"x"});
  }
  // Without a seed, each derives its own from its request id: none is set here.
  r.sampling.seed.reset();
  Expected<std::vector<Request>> unseeded = fan_out_choices(r, 2);  // held: the loop reads it
  ASSERT_TRUE(unseeded.ok());
  for (const Request& c : *unseeded) EXPECT_FALSE(c.sampling.seed);
}

TEST(FanOutChoices, NIsBoundedAndSessionsAndIdsTakeOne) {
  Request r;
  r.prompt = std::vector<TokenId>{5};
  EXPECT_TRUE(fan_out_choices(r, kMaxChoices).ok());
  for (int32_t n : {0, -1, kMaxChoices + 1}) {
    Expected<std::vector<Request>> bad = fan_out_choices(r, n);
    ASSERT_FALSE(bad.ok()) << n;
    EXPECT_TRUE(bad.error().message.starts_with("n:")) << bad.error().message;
  }
  Request turn = r;
  turn.session_id = "s";
  EXPECT_TRUE(fan_out_choices(turn, 1).ok());
  EXPECT_FALSE(fan_out_choices(turn, 2).ok());
  Request with_id = r;
  with_id.id = 7;
  EXPECT_FALSE(fan_out_choices(with_id, 2).ok());
}

}  // namespace
}  // namespace drift
