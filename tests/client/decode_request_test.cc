// The wire form of a DecodeRequest and the checks on its reply
// (client/src/decode_request.h).
#include "decode_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vaed::client {
namespace {

using ::testing::HasSubstr;

TEST(DecodeRequestTest, LatentSpaceTravelsInTheDecode) {
  DecodeRequest request;
  request.latent = {0, 0, DType::kFloat32, {1, 24, 7, 16, 16}};
  v1::Decode d;
  ASSERT_TRUE(BuildDecode(request, /*plan_only=*/true, nullptr, &d).ok());
  EXPECT_EQ(d.latent_space(), v1::LATENT_SPACE_NORMALIZED);
  request.latent_space = LatentSpace::kDenormalized;
  ASSERT_TRUE(BuildDecode(request, /*plan_only=*/true, nullptr, &d).ok());
  EXPECT_EQ(d.latent_space(), v1::LATENT_SPACE_DENORMALIZED);
}

// A daemon that predates Decode.latent_space ignores it and decodes
// de-normalised latents as normalised: its reply names no latent space, and
// the client must not hand those frames over as a success.
TEST(DecodeRequestTest, ADenormalizedRequestAnsweredWithoutItsLatentSpaceIsAVersionMismatch) {
  DecodeRequest request;
  request.latent_space = LatentSpace::kDenormalized;
  v1::DecodeReply old_daemon;  // latent_space unspecified
  const Status s = CheckLatentSpaceHonoured(request, old_daemon);
  EXPECT_EQ(s.code(), StatusCode::kVersionMismatch);
  EXPECT_EQ(s.field(), "latent_space");
  EXPECT_THAT(s.message(), HasSubstr("not honoured"));

  v1::DecodeReply honoured;
  honoured.set_latent_space(v1::LATENT_SPACE_DENORMALIZED);
  EXPECT_TRUE(CheckLatentSpaceHonoured(request, honoured).ok());
  // A normalized request is what every daemon does.
  request.latent_space = LatentSpace::kNormalized;
  EXPECT_TRUE(CheckLatentSpaceHonoured(request, old_daemon).ok());
}

}  // namespace
}  // namespace vaed::client
