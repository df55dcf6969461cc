// No exception leaves the client library: an exception
// thrown inside each C ABI entry point, inside a Client call while a
// request is on the wire, in the heartbeat thread, while starting it, and
// by a user's progress callback comes back as a status (or, for the
// callback, to Decode's caller once the decode is over), and the client
// keeps working. Faults are injected through the library's internal seam
// (client/src/fault_points.h) against a real daemon.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "fault_points.h"
#include "tests/common/daemon_process.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"
#include "vaed/vaed_c.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

using testing::DaemonProcess;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// What an armed fault throws.
enum class Thrown { kBadAlloc, kRuntimeError, kInt, kSystemError };

// Arms the library's fault point `point` for the scope: the next `times`
// times it is reached, it throws `thrown`. One at a time (the hook is a
// plain function pointer).
class ScopedFault {
 public:
  ScopedFault(const char* point, Thrown thrown, int times = 1) {
    point_ = point;
    thrown_ = thrown;
    remaining_ = times;
    fired_ = 0;
    client::internal::SetFaultHook(&Hook);
  }
  ~ScopedFault() { client::internal::SetFaultHook(nullptr); }
  ScopedFault(const ScopedFault&) = delete;
  ScopedFault& operator=(const ScopedFault&) = delete;

  // How many times the fault was thrown so far.
  static int fired() { return fired_.load(); }

 private:
  static void Hook(const char* point) {
    if (std::strcmp(point, point_) != 0 || remaining_.fetch_sub(1) <= 0) return;
    ++fired_;
    switch (thrown_) {
      case Thrown::kBadAlloc:
        throw std::bad_alloc();
      case Thrown::kRuntimeError:
        throw std::runtime_error("injected fault");
      case Thrown::kInt:
        throw 42;
      case Thrown::kSystemError:
        throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    }
  }
  static inline const char* point_ = "";
  static inline Thrown thrown_ = Thrown::kRuntimeError;
  static inline std::atomic<int> remaining_{0};
  static inline std::atomic<int> fired_{0};
};

// One daemon (seeded demo model) for the whole binary.
class ClientExceptionsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Heartbeats every 200 ms, so the heartbeat thread's fault fires soon.
    const std::string cfg = testing::WriteTempConfig("client-exceptions", "daemon",
                                                     "[server]\nheartbeat_interval_ms = 200\n");
    daemon_ = new DaemonProcess({"--config", cfg});
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(daemon_->ok()) << daemon_->Log(); }

  static Result<std::unique_ptr<client::Client>> Connect(bool heartbeats = true) {
    return client::Client::Connect(
        {.socket = daemon_->socket(), .client_name = "exceptions-test", .heartbeats = heartbeats});
  }

  static inline DaemonProcess* daemon_ = nullptr;
};

// A demo-model decode of 3 frames through the C++ client: its latent and
// output regions, registered.
struct CppDecode {
  static constexpr int64_t kFrames = 3;
  std::unique_ptr<client::SharedRegion> in, out;
  client::DecodeRequest request;

  Status Prepare(client::Client& c) {
    const std::vector<int64_t> latent_shape = {kFrames, 32, 4, 4};
    VAED_ASSIGN_OR_RETURN(v1::DecodeReply plan,
                          ClientProtocol::PlanDecode(c, "demo", DType::kFloat32, latent_shape,
                                                     client::OutputFormat::kUInt8NHWC));
    VAED_ASSIGN_OR_RETURN(in, client::SharedRegion::Create(kFrames * 32 * 4 * 4 * 4));
    VAED_ASSIGN_OR_RETURN(out, client::SharedRegion::Create(plan.output_bytes()));
    auto* latent = reinterpret_cast<float*>(in->data());
    for (int64_t i = 0; i < kFrames * 32 * 4 * 4; ++i)
      latent[i] = 0.01f * static_cast<float>(i % 97);
    VAED_ASSIGN_OR_RETURN(uint64_t in_id, c.RegisterRegion(*in));
    VAED_ASSIGN_OR_RETURN(uint64_t out_id, c.RegisterRegion(*out));
    request.model = "demo";
    request.latent = {in_id, 0, DType::kFloat32, latent_shape};
    request.output = {out_id, 0, DType::kUInt8,
                      std::vector<int64_t>(plan.output_shape().begin(), plan.output_shape().end())};
    return Status::Ok();
  }
  std::string Output() const {
    return std::string(reinterpret_cast<const char*>(out->data()), out->size());
  }
};

// --- the C ABI ------------------------------------------------------------

// A C ABI session: a client, a float32 latent [frames, 32, 3, 3] of the
// demo model and its uint8 output, both in registered regions.
struct CSession {
  vaed_client* client = nullptr;
  vaed_region *in = nullptr, *out = nullptr;
  vaed_tensor latent{}, output{};

  // Connects and registers; check HasFatalFailure() afterwards.
  void Open(const std::string& socket, int64_t frames) {
    char err[256] = {};
    ASSERT_EQ(vaed_connect(socket.c_str(), "c-abi", &client, err, sizeof(err)), 0) << err;
    latent.dtype = VAED_DTYPE_FLOAT32;
    latent.ndim = 4;
    const int64_t shape[4] = {frames, 32, 3, 3};
    std::memcpy(latent.shape, shape, sizeof(shape));
    vaed_decode_result plan{};
    ASSERT_EQ(
        vaed_plan_decode(client, "demo", &latent, VAED_OUTPUT_UINT8_NHWC, &plan, err, sizeof(err)),
        0)
        << err;
    ASSERT_EQ(vaed_region_create(frames * 32 * 3 * 3 * 4, &in, err, sizeof(err)), 0) << err;
    ASSERT_EQ(vaed_region_create(plan.output_bytes, &out, err, sizeof(err)), 0) << err;
    ASSERT_EQ(vaed_register_region(client, in, &latent.region_id, err, sizeof(err)), 0) << err;
    ASSERT_EQ(vaed_register_region(client, out, &output.region_id, err, sizeof(err)), 0) << err;
    output.dtype = VAED_DTYPE_UINT8;
    output.ndim = plan.output_ndim;
    std::memcpy(output.shape, plan.output_shape, sizeof(plan.output_shape));
  }

  vaed_status Decode(vaed_decode_result* result, char* err, size_t err_len) {
    return vaed_decode(client, "demo", &latent, &output, VAED_OUTPUT_UINT8_NHWC, result, err,
                       err_len);
  }

  ~CSession() {
    vaed_region_free(in);
    vaed_region_free(out);
    vaed_client_free(client);
  }
};

TEST_F(ClientExceptionsTest, CApiEntryPointsReportAThrownExceptionAsAStatus) {
  CSession s;
  ASSERT_NO_FATAL_FAILURE(s.Open(daemon_->socket(), 2));
  char err[256] = {};

  // The _ex entry points' request: the session's demo latent and output.
  auto demo_request = [&] {
    vaed_request request;
    vaed_request_init(&request);
    request.model = "demo";
    request.latent = &s.latent;
    request.output = &s.output;
    return request;
  };
  // Every entry point that returns a status, as a call that succeeds when
  // no fault is armed (and cleans up after itself).
  const std::vector<std::pair<const char*, std::function<vaed_status(char*, size_t)>>> calls = {
      {"vaed_connect",
       [&](char* e, size_t n) {
         vaed_client* c = nullptr;
         const vaed_status st = vaed_connect(daemon_->socket().c_str(), "c-abi-2", &c, e, n);
         EXPECT_EQ(st == 0, c != nullptr) << "a failed vaed_connect must leave *out alone";
         vaed_client_free(c);
         return st;
       }},
      {"vaed_region_create",
       [&](char* e, size_t n) {
         vaed_region* r = nullptr;
         const vaed_status st = vaed_region_create(64, &r, e, n);
         vaed_region_free(r);
         return st;
       }},
      {"vaed_register_region",
       [&](char* e, size_t n) {
         uint64_t id = 0;
         return vaed_register_region(s.client, s.in, &id, e, n);
       }},
      {"vaed_plan_decode",
       [&](char* e, size_t n) {
         vaed_decode_result r{};
         return vaed_plan_decode(s.client, "demo", &s.latent, VAED_OUTPUT_UINT8_NHWC, &r, e, n);
       }},
      {"vaed_decode",
       [&](char* e, size_t n) {
         vaed_decode_result r{};
         return s.Decode(&r, e, n);
       }},
      {"vaed_decode_on_stream",
       [&](char* e, size_t n) {
         // Host regions only: the stream is not used (no CUDA is touched).
         vaed_decode_result r{};
         return vaed_decode_on_stream(s.client, "demo", &s.latent, &s.output,
                                      VAED_OUTPUT_UINT8_NHWC, nullptr, &r, e, n);
       }},
      {"vaed_plan_decode_ex",
       [&](char* e, size_t n) {
         const vaed_request request = demo_request();
         vaed_reply reply;
         vaed_reply_init(&reply);
         return vaed_plan_decode_ex(s.client, &request, &reply, e, n);
       }},
      {"vaed_decode_ex",
       [&](char* e, size_t n) {
         const vaed_request request = demo_request();
         vaed_reply reply;
         vaed_reply_init(&reply);
         return vaed_decode_ex(s.client, &request, &reply, e, n);
       }},
      {"vaed_unregister_region",
       [&](char* e, size_t n) {
         vaed_region* r = nullptr;
         uint64_t id = 0;
         vaed_status st = vaed_region_create(64, &r, e, n);
         if (st == 0) st = vaed_register_region(s.client, r, &id, e, n);
         // The fault point fires first: a region registered while this
         // call was armed stays registered until the client goes.
         if (st == 0) st = vaed_unregister_region(s.client, id, e, n);
         vaed_region_free(r);
         return st;
       }},
  };
  for (const auto& [name, call] : calls) {
    SCOPED_TRACE(name);
    {
      ScopedFault fault(name, Thrown::kBadAlloc);
      EXPECT_EQ(call(err, sizeof(err)), static_cast<int>(StatusCode::kResourceExhausted));
      EXPECT_EQ(std::string(err), std::string("resource_exhausted: ") + name + ": out of memory");
    }
    {
      ScopedFault fault(name, Thrown::kRuntimeError);
      EXPECT_EQ(call(err, sizeof(err)), static_cast<int>(StatusCode::kInternal));
      EXPECT_EQ(std::string(err),
                std::string("internal: ") + name + ": unexpected exception: injected fault");
    }
    {
      ScopedFault fault(name, Thrown::kInt, /*times=*/2);
      EXPECT_EQ(call(nullptr, 0), static_cast<int>(StatusCode::kInternal));  // err may be NULL
      char small[12];
      EXPECT_EQ(call(small, sizeof(small)), static_cast<int>(StatusCode::kInternal));
      EXPECT_EQ(std::string(small), "internal: v");  // truncated, NUL-terminated
    }
    // Unarmed, the same call succeeds: the client keeps working.
    EXPECT_EQ(call(err, sizeof(err)), 0) << err;
  }
}

TEST_F(ClientExceptionsTest, CApiThrowMidRequestIsAStatusAndTheNextCallReconnects) {
  CSession s;
  ASSERT_NO_FATAL_FAILURE(s.Open(daemon_->socket(), 1));
  char err[256] = {};
  vaed_decode_result result{};
  {
    // Thrown after the request was sent, while its reply is awaited.
    ScopedFault fault("client.exchange", Thrown::kBadAlloc);
    EXPECT_EQ(s.Decode(&result, err, sizeof(err)),
              static_cast<int>(StatusCode::kResourceExhausted));
    EXPECT_THAT(std::string(err),
                HasSubstr("talking to vaed at " + daemon_->socket() + ": out of memory"));
    EXPECT_EQ(ScopedFault::fired(), 1);
  }
  // The next call replaces the connection and re-registers the regions
  // under the ids the caller holds.
  EXPECT_EQ(s.Decode(&result, err, sizeof(err)), 0) << err;
  EXPECT_EQ(result.frames, 1u);
}

// --- the C++ client -------------------------------------------------------

TEST_F(ClientExceptionsTest, ThrowMidRequestIsAStatusAndTheNextCallReconnects) {
  auto c = Connect();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  CppDecode job;
  ASSERT_TRUE(job.Prepare(**c).ok());
  {
    ScopedFault fault("client.exchange", Thrown::kRuntimeError);
    Result<v1::DecodeReply> failed = ClientProtocol::Decode(**c, job.request);
    ASSERT_FALSE(failed.ok());
    EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
    EXPECT_THAT(failed.status().message(), HasSubstr("unexpected exception: injected fault"));
    // Not retried within the call: the daemon may still be decoding it.
    EXPECT_EQ(ScopedFault::fired(), 1);
    EXPECT_EQ((*c)->reconnects(), 0u);
  }
  Result<v1::DecodeReply> reply = ClientProtocol::Decode(**c, job.request);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->frames(), static_cast<uint32_t>(CppDecode::kFrames));
  EXPECT_EQ((*c)->reconnects(), 1u);
  EXPECT_TRUE(ClientProtocol::GetStatus(**c).ok());
}

TEST_F(ClientExceptionsTest, HeartbeatThreadSurvivesAThrowAndTheNextCallReconnects) {
  auto c = Connect(/*heartbeats=*/true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(ClientProtocol::Hello(**c).heartbeat_interval_ms(), 200u);
  {
    ScopedFault fault("client.heartbeat", Thrown::kBadAlloc);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (ScopedFault::fired() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(ScopedFault::fired(), 1) << "the heartbeat thread never reached its fault point";
  }
  // The process is still here (an exception leaving a std::thread would
  // have terminated it); the thread marked the connection broken, so the
  // next call starts over on a fresh one.
  Result<v1::StatusReply> status = ClientProtocol::GetStatus(**c);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ((*c)->reconnects(), 1u);
  // And the thread beats on after the reconnect: it reaches its fault
  // point again.
  ScopedFault again("client.heartbeat", Thrown::kRuntimeError);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ScopedFault::fired() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(ScopedFault::fired(), 1) << "the heartbeat thread stopped beating";
}

TEST_F(ClientExceptionsTest, ConnectReportsAHeartbeatThreadThatCannotStart) {
  {
    ScopedFault fault("client.start_heartbeat", Thrown::kSystemError);
    auto c = Connect(/*heartbeats=*/true);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), StatusCode::kInternal);
    EXPECT_THAT(c.status().message(), StartsWith("starting the heartbeat thread: "));
  }
  auto c = Connect(/*heartbeats=*/true);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(ClientProtocol::GetStatus(**c).ok());
}

TEST_F(ClientExceptionsTest, RethrowsAThrowingProgressCallbackAfterTheDecodeCompletes) {
  auto c = Connect();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  CppDecode job;
  ASSERT_TRUE(job.Prepare(**c).ok());
  ASSERT_TRUE(ClientProtocol::Decode(**c, job.request).ok());
  const std::string expected = job.Output();
  std::memset(job.out->data(), 0, job.out->size());

  int calls = 0;
  job.request.progress = [&](const client::Progress&) {
    ++calls;
    throw std::runtime_error("callback bug");
  };
  try {
    (void)ClientProtocol::Decode(**c, job.request);
    ADD_FAILURE() << "Decode did not rethrow the callback's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "callback bug");
  }
  // Called once, then no more; Decode waited for the whole decode.
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(job.Output(), expected);

  // The client works on, progress included.
  std::vector<double> fractions;
  job.request.progress = [&](const client::Progress& p) { fractions.push_back(p.fraction); };
  Result<v1::DecodeReply> reply = ClientProtocol::Decode(**c, job.request);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_FALSE(fractions.empty());
  EXPECT_EQ(fractions.back(), 1.0);
  EXPECT_EQ((*c)->reconnects(), 0u);
}

TEST_F(ClientExceptionsTest, RegisterRegionRefusesAMovedFromRegion) {
  auto c = Connect();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto r = client::SharedRegion::Create(64);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  client::SharedRegion owner(std::move(**r));
  Result<uint64_t> id = (*c)->RegisterRegion(**r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(id.status().message(), HasSubstr("moved from"));
  EXPECT_TRUE((*c)->RegisterRegion(owner).ok());
}

}  // namespace
}  // namespace vaed
