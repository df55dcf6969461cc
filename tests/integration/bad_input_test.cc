// Acceptance: bad input gets a precise error and the daemon keeps serving.
// Every test sends one kind of bad request to a real `vaed` process, checks
// the error code and that the message names the field and the rule, then
// proves the same daemon still decodes a valid request.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>

#include "tests/common/daemon_process.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/wire.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

using ::testing::HasSubstr;
using testing::DaemonProcess;

// A small demo-model latent: float32 [1, 32, 4, 4] -> uint8 [1, 32, 32, 3].
const std::vector<int64_t> kLatentShape = {1, 32, 4, 4};
const std::vector<int64_t> kOutputShape = {1, 32, 32, 3};
constexpr uint64_t kLatentBytes = 1 * 32 * 4 * 4 * 4;
constexpr uint64_t kOutputBytes = 1 * 32 * 32 * 3;

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::vector<std::string> args = testing::NoQuarantineArgs();
    args.insert(args.end(), {"--intra-op-threads", "1"});
    daemon_ = new DaemonProcess(args);
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Terminate(), 0) << daemon_->Log();
    delete daemon_;
  }

  void SetUp() override {
    ASSERT_TRUE(daemon_->ok()) << daemon_->Log();
    auto c = client::Client::Connect({.socket = daemon_->socket(), .client_name = "bad-input"});
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
    auto in = client::SharedRegion::Create(kLatentBytes);
    auto out = client::SharedRegion::Create(kOutputBytes);
    ASSERT_TRUE(in.ok() && out.ok());
    in_ = std::move(in).value();
    out_ = std::move(out).value();
    float* f = reinterpret_cast<float*>(in_->data());
    for (uint64_t i = 0; i < kLatentBytes / 4; ++i) f[i] = std::sin(0.1f * float(i));
    auto in_id = client_->RegisterRegion(*in_);
    auto out_id = client_->RegisterRegion(*out_);
    ASSERT_TRUE(in_id.ok() && out_id.ok());
    in_id_ = *in_id;
    out_id_ = *out_id;
  }

  // A valid request, to be broken by each test.
  client::DecodeRequest Valid() const {
    return {.model = "",
            .latent = {in_id_, 0, DType::kFloat32, kLatentShape},
            .output = {out_id_, 0, DType::kUInt8, kOutputShape},
            .format = client::OutputFormat::kUInt8NHWC};
  }

  // The daemon still serves: a valid decode succeeds, on this connection
  // and on a fresh one.
  void ExpectStillServing() {
    auto r = ClientProtocol::Decode(*client_, Valid());
    ASSERT_TRUE(r.ok()) << r.status().ToString() << "\n" << daemon_->Log();
    EXPECT_EQ(r->frames(), 1u);
    auto fresh = client::Client::Connect({.socket = daemon_->socket()});
    ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
    auto status = ClientProtocol::GetStatus(**fresh);
    ASSERT_TRUE(status.ok());
    EXPECT_TRUE(status->healthy());
  }

  void ExpectError(const Status& s, StatusCode code, const std::string& fragment) {
    EXPECT_EQ(s.code(), code) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(fragment));
  }

  // Sends a raw Decode built from Valid() after `mutate` (for fields the
  // client library would otherwise fill correctly).
  Status RawDecode(const std::function<void(v1::Decode*)>& mutate) {
    v1::Request req;
    req.set_request_id(777);
    req.set_client_id(client_->client_id());
    v1::Decode* d = req.mutable_decode();
    const client::DecodeRequest v = Valid();
    ToProto(TensorRef{v.latent.region_id, 0, kLatentBytes, DType::kFloat32, kLatentShape},
            d->mutable_latent());
    ToProto(TensorRef{v.output.region_id, 0, kOutputBytes, DType::kUInt8, kOutputShape},
            d->mutable_output());
    mutate(d);
    auto reply = ClientProtocol::SendRaw(*client_, req.SerializeAsString());
    if (!reply.ok()) return reply.status();
    EXPECT_EQ(reply->request_id(), 777u);
    if (reply->has_error()) return FromProtoError(reply->error());
    return Status::Ok();
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::SharedRegion> in_, out_;
  uint64_t in_id_ = 0, out_id_ = 0;
};
DaemonProcess* BadInputTest::daemon_ = nullptr;

TEST_F(BadInputTest, ValidDecodeReportsTimingsShapesAndWarmState) {
  auto first = ClientProtocol::Decode(*client_, Valid());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = ClientProtocol::Decode(*client_, Valid());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->warm());
  EXPECT_TRUE(second->demo_weights());
  EXPECT_EQ(second->model(), "demo");
  EXPECT_EQ(std::vector<int64_t>(second->latent_shape().begin(), second->latent_shape().end()),
            kLatentShape);
  EXPECT_EQ(second->latent_dtype(), v1::DTYPE_FLOAT32);
  EXPECT_EQ(std::vector<int64_t>(second->output_shape().begin(), second->output_shape().end()),
            kOutputShape);
  EXPECT_EQ(second->output_dtype(), v1::DTYPE_UINT8);
  EXPECT_EQ(second->height_px(), 32u);
  EXPECT_EQ(second->width_px(), 32u);
  EXPECT_EQ(second->compute_dtype(), "float32");
  std::map<std::string, double> t;
  for (const auto& x : second->timings()) t[x.component()] = x.seconds();
  ASSERT_TRUE(t.count("decode"));
  ASSERT_TRUE(t.count("taef2.decode_latent"));
  EXPECT_GT(t["decode"], 0.0);
  EXPECT_GE(t["decode"], t["taef2.decode_latent"]);
  // The output was really written: the demo decoder's output is not all zero.
  uint64_t nonzero = 0;
  for (uint64_t i = 0; i < kOutputBytes; ++i) nonzero += out_->data()[i] != 0;
  EXPECT_GT(nonzero, 0u);
}

TEST_F(BadInputTest, FirstDecodeOfAShapeIsColdNextIsWarm) {
  client::DecodeRequest r = Valid();
  // A shape no other test uses: [1, 32, 3, 5].
  r.latent.shape = {1, 32, 3, 5};
  r.output.shape = {1, 24, 40, 3};
  auto first = ClientProtocol::Decode(*client_, r);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->warm());
  auto second = ClientProtocol::Decode(*client_, r);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->warm());
}

TEST_F(BadInputTest, RejectsUnknownRegion) {
  client::DecodeRequest r = Valid();
  r.latent.region_id = 987654;
  ExpectError(ClientProtocol::Decode(*client_, r).status(), StatusCode::kNotFound,
              "latent.region_id 987654");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsOtherClientsRegion) {
  auto other = client::Client::Connect({.socket = daemon_->socket(), .client_name = "other"});
  ASSERT_TRUE(other.ok());
  client::DecodeRequest r = Valid();  // names regions of client_, not of `other`
  ExpectError(ClientProtocol::Decode(**other, r).status(), StatusCode::kNotFound,
              "not a region registered by this client");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsOffsetPlusSizePastEnd) {
  client::DecodeRequest r = Valid();
  r.latent.offset = 8;  // 8 + kLatentBytes > region size
  ExpectError(ClientProtocol::Decode(*client_, r).status(), StatusCode::kOutOfRange, "latent");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsOffsetThatOverflowsUint64) {
  client::DecodeRequest r = Valid();
  r.output.offset = std::numeric_limits<uint64_t>::max() - 16;
  ExpectError(ClientProtocol::Decode(*client_, r).status(), StatusCode::kOutOfRange, "output");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsSegmentSmallerThanClaimed) {
  // Claim more bytes than the segment holds: the daemon checks with fstat.
  v1::Request req;
  req.set_request_id(5);
  req.set_client_id(client_->client_id());
  req.mutable_register_region()->mutable_host()->set_name(in_->name());
  req.mutable_register_region()->mutable_host()->set_size_bytes(in_->size() * 4);
  auto reply = ClientProtocol::SendRaw(*client_, req.SerializeAsString());
  ASSERT_TRUE(reply.ok());
  ASSERT_TRUE(reply->has_error());
  ExpectError(FromProtoError(reply->error()), StatusCode::kOutOfRange, "fstat");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsSegmentThatShrankAfterRegistration) {
  auto seg = client::SharedRegion::Create(kLatentBytes);
  ASSERT_TRUE(seg.ok());
  auto id = client_->RegisterRegion(**seg);
  ASSERT_TRUE(id.ok());
  const int fd = shm_open(("/" + (*seg)->name()).c_str(), O_RDWR, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 64), 0);
  close(fd);
  client::DecodeRequest r = Valid();
  r.latent.region_id = *id;
  ExpectError(ClientProtocol::Decode(*client_, r).status(), StatusCode::kOutOfRange, "shrank");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsUnknownRegionName) {
  v1::Request req;
  req.set_request_id(6);
  req.set_client_id(client_->client_id());
  req.mutable_register_region()->mutable_host()->set_name("vaed-does-not-exist-42");
  req.mutable_register_region()->mutable_host()->set_size_bytes(64);
  auto reply = ClientProtocol::SendRaw(*client_, req.SerializeAsString());
  ASSERT_TRUE(reply.ok() && reply->has_error());
  EXPECT_EQ(FromProtoError(reply->error()).code(), StatusCode::kNotFound);
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsRegionNameWithPathTraversal) {
  v1::Request req;
  req.set_request_id(7);
  req.set_client_id(client_->client_id());
  req.mutable_register_region()->mutable_host()->set_name("../etc/passwd");
  req.mutable_register_region()->mutable_host()->set_size_bytes(64);
  auto reply = ClientProtocol::SendRaw(*client_, req.SerializeAsString());
  ASSERT_TRUE(reply.ok() && reply->has_error());
  ExpectError(FromProtoError(reply->error()), StatusCode::kInvalidArgument, "region.name");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsWrongLatentDtype) {
  client::DecodeRequest r = Valid();
  r.latent.dtype = DType::kFloat16;
  r.latent.shape = {1, 32, 4, 8};  // same byte size as the valid latent
  ExpectError(ClientProtocol::Decode(*client_, r).status(), StatusCode::kInvalidArgument,
              "latent.dtype");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsWrongLatentRank) {
  client::DecodeRequest r = Valid();
  r.latent.shape = {32, 4, 4};
  ExpectError(ClientProtocol::Decode(*client_, r).status(), StatusCode::kInvalidArgument,
              "latent.shape");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsWrongChannelCount) {
  client::DecodeRequest r = Valid();
  r.latent.shape = {2, 16, 4, 4};
  ExpectError(ClientProtocol::Decode(*client_, r).status(), StatusCode::kInvalidArgument,
              "latent.shape[1]");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsZeroSizeDims) {
  client::DecodeRequest r = Valid();
  r.latent.shape = {1, 32, 0, 4};
  ExpectError(ClientProtocol::Decode(*client_, r).status(), StatusCode::kInvalidArgument,
              "latent.shape[2]");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsOutputWithWrongShape) {
  client::DecodeRequest r = Valid();
  r.output.shape = {1, 32, 16, 6};
  ExpectError(ClientProtocol::Decode(*client_, r).status(), StatusCode::kInvalidArgument,
              "[1, 32, 32, 3]");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsSizeBytesThatDisagreesWithShape) {
  Status s = RawDecode([](v1::Decode* d) { d->mutable_latent()->set_size_bytes(12); });
  ExpectError(s, StatusCode::kInvalidArgument, "latent.size_bytes is 12");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsOutputOverlappingLatent) {
  Status s = RawDecode([&](v1::Decode* d) {
    d->mutable_output()->set_region_id(in_id_);
    d->mutable_output()->set_offset_bytes(0);
    d->mutable_output()->clear_shape();
    for (int64_t x : {1, 32, 32, 3}) d->mutable_output()->add_shape(x);
  });
  // The output does not fit the latent region either; both are errors, and
  // the range check comes first.
  EXPECT_FALSE(s.ok());
  ExpectStillServing();
}

TEST_F(BadInputTest, ReportsNanLatentsInsteadOfDecoding) {
  float* f = reinterpret_cast<float*>(in_->data());
  f[3] = std::nanf("");
  f[9] = std::numeric_limits<float>::infinity();
  ExpectError(ClientProtocol::Decode(*client_, Valid()).status(), StatusCode::kInvalidArgument,
              "2 non-finite values");
  f[3] = 0.f;
  f[9] = 0.f;
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsUnknownModelAndListsKnownOnes) {
  client::DecodeRequest r = Valid();
  r.model = "sdxl-vae";
  Status s = ClientProtocol::Decode(*client_, r).status();
  ExpectError(s, StatusCode::kNotFound, "sdxl-vae");
  EXPECT_THAT(s.message(), HasSubstr("demo"));
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsUnsupportedProfile) {
  Status s = RawDecode([](v1::Decode* d) { d->mutable_options()->set_profile("turbo"); });
  ExpectError(s, StatusCode::kInvalidArgument, "options.profile");
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsProtocolVersionMismatch) {
  v1::Request req;
  req.set_request_id(9);
  req.mutable_hello()->set_protocol_version(2);
  req.mutable_hello()->set_client_name("from-the-future");
  auto reply = ClientProtocol::SendRaw(*client_, req.SerializeAsString());
  ASSERT_TRUE(reply.ok());
  ASSERT_TRUE(reply->has_error());
  ExpectError(FromProtoError(reply->error()), StatusCode::kVersionMismatch,
              "protocol version 2");
  ExpectStillServing();
}

TEST_F(BadInputTest, AnswersGarbageBytesWithProtocolError) {
  auto reply = ClientProtocol::SendRaw(*client_, std::string("\xff\xfe garbage \x01\x02\x03", 15));
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_TRUE(reply->has_error());
  EXPECT_EQ(FromProtoError(reply->error()).code(), StatusCode::kProtocolError);
  auto status = ClientProtocol::GetStatus(*client_);
  ASSERT_TRUE(status.ok());
  EXPECT_GE(status->protocol_errors(), 1u);
  ExpectStillServing();
}

TEST_F(BadInputTest, RejectsRequestWithoutHello) {
  v1::Request req;
  req.set_request_id(10);
  req.set_client_id(424242);
  req.mutable_status();
  auto reply = ClientProtocol::SendRaw(*client_, req.SerializeAsString());
  ASSERT_TRUE(reply.ok() && reply->has_error());
  ExpectError(FromProtoError(reply->error()), StatusCode::kUnknownClient, "send Hello");
  ExpectStillServing();
}

// A CPU daemon refuses CUDA IPC regions saying so; a malformed one is
// refused naming the field first.
TEST_F(BadInputTest, RejectsCudaRegionOnCpuBuild) {
  v1::Request req;
  req.set_request_id(11);
  req.set_client_id(client_->client_id());
  v1::CudaIpcRegion* cuda = req.mutable_register_region()->mutable_cuda();
  cuda->set_ipc_handle(std::string(64, '\0'));
  cuda->set_size_bytes(1024);
  cuda->set_device_uuid("GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf");
  auto reply = ClientProtocol::SendRaw(*client_, req.SerializeAsString());
  ASSERT_TRUE(reply.ok() && reply->has_error());
  ExpectError(FromProtoError(reply->error()), StatusCode::kFailedPrecondition,
              "this daemon has no CUDA ranks");
  EXPECT_EQ(reply->error().field(), "register_region.cuda");

  cuda->set_device_uuid("cuda:0");
  reply = ClientProtocol::SendRaw(*client_, req.SerializeAsString());
  ASSERT_TRUE(reply.ok() && reply->has_error());
  ExpectError(FromProtoError(reply->error()), StatusCode::kInvalidArgument, "32 hex digits");
  EXPECT_EQ(reply->error().field(), "register_region.cuda.device_uuid");
  ExpectStillServing();
}

TEST(DaemonStartTest, RefusesSocketAlreadyServedByAnotherDaemon) {
  DaemonProcess first({});
  ASSERT_TRUE(first.ok()) << first.Log();
  testing::RunResult second = testing::RunVaed({"--socket", first.socket()});
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_THAT(second.output, HasSubstr("already serving"));
  // The first one is untouched.
  auto c = client::Client::Connect({.socket = first.socket()});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  c->reset();
  EXPECT_EQ(first.Terminate(), 0);
}

TEST_F(BadInputTest, RejectsControlCharactersInNames) {
  client::DecodeRequest r = Valid();
  r.model = "demo\n2026-11-30 critical forged";
  ExpectError(ClientProtocol::Decode(*client_, r).status(), StatusCode::kInvalidArgument,
              "printable ASCII");
  auto forged = client::Client::Connect(
      {.socket = daemon_->socket(), .client_name = "w0\ncritical FORGED"});
  ASSERT_FALSE(forged.ok());
  EXPECT_THAT(forged.status().message(), HasSubstr("hello.client_name"));
  ExpectStillServing();
}

TEST(ClientConnectTest, ReportsDaemonDownWithTheSocketPath) {
  auto c = client::Client::Connect({.socket = "/tmp/vaed-no-such-dir/vaed.sock"});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(c.status().message(), HasSubstr("/tmp/vaed-no-such-dir/vaed.sock"));
}

}  // namespace
}  // namespace vaed
