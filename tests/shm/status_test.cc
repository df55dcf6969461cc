#include "vaed/status.h"
#include "vaed/wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <string>

namespace vaed {
namespace {

using ::testing::HasSubstr;

TEST(StatusTest, DefaultStatusIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(StatusTest, WithContextPrefixesMessageAndKeepsCode) {
  Status s = OutOfRange("bytes [8, 8 + 4) do not fit").WithContext("decode");
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.message(), "decode: bytes [8, 8 + 4) do not fit");
}

TEST(StatusTest, WithContextLeavesOkStatusOk) {
  Status s = Status::Ok().WithContext("decode");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, WithContextKeepsTheTypedReasonFieldAndRetryAfter) {
  const Status s = Busy("queue full", 250)
                       .WithReason(ErrorReason::kOutOfMemory)
                       .WithField("options.group_size")
                       .WithContext("decode");
  EXPECT_EQ(s.message(), "decode: queue full");
  EXPECT_EQ(s.reason(), ErrorReason::kOutOfMemory);
  EXPECT_EQ(s.field(), "options.group_size");
  EXPECT_EQ(s.retry_after_ms(), 250u);
}

TEST(StatusTest, FieldTravelsOnTheWireAndTheReasonDoesNot) {
  const Status s = InvalidArgument("rule").WithField("av_sync.independent_lengths")
                       .WithReason(ErrorReason::kCollective);
  const Status back = FromProtoError(ToProtoError(s));
  EXPECT_EQ(back.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(back.field(), "av_sync.independent_lengths");
  EXPECT_EQ(back.reason(), ErrorReason::kNone);
}

TEST(StatusTest, ToStringOfOkIsOk) { EXPECT_EQ(Status::Ok().ToString(), "ok"); }

TEST(StatusTest, ToStringShowsCodeNameAndMessage) {
  EXPECT_EQ(InvalidArgument("latent.shape[1] is 16").ToString(),
            "invalid_argument: latent.shape[1] is 16");
  EXPECT_EQ(ClientFault("x").ToString(), "client_fault: x");
}

TEST(StatusTest, ErrnoStatusMapsEnoentToNotFoundAndKeepsErrno) {
  Status s = ErrnoStatus(ENOENT, "open shm segment 'x'");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("open shm segment 'x': "));
  EXPECT_THAT(s.message(), HasSubstr("(errno " + std::to_string(ENOENT) + ")"));
}

TEST(StatusTest, ErrnoStatusMapsEnomemToResourceExhausted) {
  EXPECT_EQ(ErrnoStatus(ENOMEM, "mmap").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoStatus(EIO, "read").code(), StatusCode::kIoError);
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(r.value(), 42);
}

TEST(ResultTest, HoldsError) {
  Result<int> r = NotFound("region 7");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "region 7");
}

TEST(ResultTest, HoldsMoveOnlyValue) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 5);
}

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  VAED_ASSIGN_OR_RETURN(int h, Half(x));
  VAED_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  VAED_RETURN_IF_ERROR(Half(x).status());
  return Status::Ok();
}

TEST(ResultTest, AssignOrReturnPassesValueThrough) {
  Result<int> r = Quarter(8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);
}

TEST(ResultTest, AssignOrReturnPropagatesFirstError) {
  Result<int> r = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
}

TEST(ResultTest, ReturnIfErrorPropagatesError) {
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vaed
