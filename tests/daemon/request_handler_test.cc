// The protocol state machine without sockets (request_handler.h): fault
// accounting and quarantine, access decisions, limits and region rules,
// driven message by message with chosen peer credentials. Also the pieces
// it rests on: QuarantineBook, ParsePeerAddress, AccessPolicy and the
// socket directory check.
#include "daemon/server/request_handler.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "daemon/models/model_registry.h"
#include "daemon/server/access_control.h"
#include "daemon/server/peer.h"
#include "daemon/server/quarantine.h"
#include "tests/common/captured_log.h"
#include "vaed/client.h"
#include "vaed/device_uuid.h"
#include "vaed/wire.h"

namespace vaed::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ------------------------------------------------------------ QuarantineBook

QuarantinePolicy SmallPolicy() {
  return {.fault_threshold = 3,
          .window = milliseconds(1000),
          .base_duration = milliseconds(100),
          .max_duration = milliseconds(350)};
}

TEST(QuarantineBookTest, TripsAtThresholdWithinTheWindowOnly) {
  QuarantineBook book(SmallPolicy());
  const PeerIdentity who{1000, 42};
  const auto t0 = Clock::now();
  // Two faults, then one after the window: the first two have expired.
  EXPECT_FALSE(book.RecordFault(who, FaultKind::kProtocol, "w", "x", t0));
  EXPECT_FALSE(book.RecordFault(who, FaultKind::kProtocol, "w", "x", t0 + milliseconds(10)));
  EXPECT_FALSE(book.RecordFault(who, FaultKind::kProtocol, "w", "x", t0 + milliseconds(1500)));
  EXPECT_TRUE(book.Check(who, t0 + milliseconds(1500)).ok());
  EXPECT_FALSE(book.RecordFault(who, FaultKind::kRegion, "w", "x", t0 + milliseconds(1600)));
  EXPECT_TRUE(
      book.RecordFault(who, FaultKind::kValidation, "w", "bad shape", t0 + milliseconds(1700)));
  const Status s = book.Check(who, t0 + milliseconds(1750));
  EXPECT_EQ(s.code(), StatusCode::kQuarantined);
  EXPECT_EQ(s.retry_after_ms(), 51u);  // 50 ms remaining, rounded up
  EXPECT_THAT(s.message(), HasSubstr("validation: bad shape"));
  EXPECT_THAT(s.message(), HasSubstr("vaectl quarantine release pid:42"));
  // Another process is not affected.
  EXPECT_TRUE(book.Check({1000, 43}, t0 + milliseconds(1750)).ok());
  // Over when the duration has passed.
  EXPECT_TRUE(book.Check(who, t0 + milliseconds(1800)).ok());
  EXPECT_EQ(book.quarantines(), 1u);
  EXPECT_EQ(book.total_faults(), 5u);
  EXPECT_EQ(book.faults(FaultKind::kProtocol), 3u);
}

TEST(QuarantineBookTest, BackOffDoublesOnRepeatUpToTheCapAndReleaseResetsIt) {
  QuarantineBook book(SmallPolicy());
  const PeerIdentity who{7, 7};
  auto t = Clock::now();
  std::vector<int64_t> durations;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 3; ++i) book.RecordFault(who, FaultKind::kProtocol, "", "x", t);
    const auto active = book.Active(t);
    ASSERT_EQ(active.size(), 1u);
    durations.push_back(active[0].duration.count());
    EXPECT_EQ(active[0].offences, static_cast<uint32_t>(round + 1));
    t += active[0].duration + milliseconds(1);
  }
  EXPECT_EQ(durations, (std::vector<int64_t>{100, 200, 350, 350}));
  // Release lifts it and resets the back-off.
  for (int i = 0; i < 3; ++i) book.RecordFault(who, FaultKind::kProtocol, "", "x", t);
  EXPECT_FALSE(book.Check(who, t).ok());
  const auto released = book.Release([](const QuarantineSnapshot&) { return true; }, t);
  ASSERT_EQ(released.size(), 1u);
  EXPECT_TRUE(book.Check(who, t).ok());
  for (int i = 0; i < 3; ++i) book.RecordFault(who, FaultKind::kProtocol, "", "x", t);
  EXPECT_EQ(book.Active(t).at(0).duration.count(), 100);
}

TEST(QuarantineBookTest, ThresholdZeroCountsButNeverQuarantines) {
  QuarantinePolicy p = SmallPolicy();
  p.fault_threshold = 0;
  QuarantineBook book(p);
  const auto t = Clock::now();
  for (int i = 0; i < 100; ++i)
    EXPECT_FALSE(book.RecordFault({1, 1}, FaultKind::kQuota, "", "x", t));
  EXPECT_TRUE(book.Check({1, 1}, t).ok());
  EXPECT_EQ(book.total_faults(), 100u);
}

TEST(QuarantineBookTest, TrackedIdentitiesAreBoundedAndQuarantinedOnesKept) {
  QuarantineBook book(SmallPolicy());
  const auto t = Clock::now();
  const PeerIdentity bad{1, 1};
  for (int i = 0; i < 3; ++i) book.RecordFault(bad, FaultKind::kProtocol, "", "x", t);
  for (int pid = 2; pid < static_cast<int>(QuarantineBook::kMaxIdentities) + 500; ++pid) {
    book.RecordFault({1, pid}, FaultKind::kProtocol, "", "x", t);
  }
  EXPECT_LE(book.tracked(), QuarantineBook::kMaxIdentities);
  EXPECT_FALSE(book.Check(bad, t).ok());
}

// ------------------------------------------------------- peer and access

TEST(PeerAddressTest, ParsesTheCredentialsZeroMqAppends) {
  auto p = ParsePeerAddress("localhost:1000:100:4242");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->uid, 1000u);
  EXPECT_EQ(p->gid, 100u);
  EXPECT_EQ(p->pid, 4242);
  EXPECT_TRUE(ParsePeerAddress(":0:0:1").has_value());
  for (const char* bad :
       {"", "localhost", "1:2", "x:1:2:", "x:a:2:3", "x:1:2:-3", "x:1:2:2147483648",
        "x:4294967296:0:1", "x:1:2:3 ", "x:1:2:99999999999999999999999"}) {
    EXPECT_FALSE(ParsePeerAddress(bad).has_value()) << bad;
  }
}

TEST(AccessPolicyTest, UnrestrictedAdmitsEveryPeer) {
  auto p = AccessPolicy::Create({}, {}, {});
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->restricted());
  EXPECT_TRUE(p->Admit({12345, 12345, 1}).ok());
  EXPECT_FALSE(p->IsAdmin({12345, 12345, 1}));
  EXPECT_TRUE(p->IsAdmin({0, 0, 1}));
  EXPECT_TRUE(p->IsAdmin({static_cast<uint32_t>(geteuid()), 0, 1}));
}

TEST(AccessPolicyTest, RestrictedAdmitsListedUidsAndGroupsOnly) {
  auto p = AccessPolicy::Create({2000}, {"4000"}, {2000});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->restricted());
  EXPECT_TRUE(p->Admit({2000, 1, 1}).ok());
  EXPECT_TRUE(p->Admit({2001, 4000, 1}).ok());  // primary gid listed
  EXPECT_TRUE(p->Admit({0, 0, 1}).ok());        // root always
  const Status denied = p->Admit({2002, 2002, 77});
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.message(), HasSubstr("peer uid 2002 gid 2002 pid 77 is not admitted"));
  EXPECT_THAT(denied.message(), HasSubstr("server.allowed_uids [2000]"));
  EXPECT_THAT(denied.message(), HasSubstr("server.allowed_groups [4000]"));
  EXPECT_TRUE(p->IsAdmin({2000, 1, 1}));
}

TEST(AccessPolicyTest, UnknownGroupNameIsAConfigErrorNamingTheEntry) {
  auto p = AccessPolicy::Create({}, {"root", "no-such-group-vaed"}, {});
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("server.allowed_groups[1]"));
  EXPECT_THAT(p.status().message(), HasSubstr("no-such-group-vaed"));
}

TEST(AccessPolicyTest, SupplementaryGroupsOfTheUidAdmit) {
  // uid 0's groups include gid 0 ("root"); list it by name and ask for a
  // peer whose primary gid is something else.
  auto p = AccessPolicy::Create({}, {"root"}, {});
  ASSERT_TRUE(p.ok());
  if (geteuid() == 0) GTEST_SKIP() << "uid 0 is admitted anyway; needs a non-root daemon uid";
  EXPECT_TRUE(p->Admit({0, 999, 1}).ok());
}

class SocketDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/vaed-dir-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  std::string root_;
};

TEST_F(SocketDirectoryTest, CreatesAMissingDirectoryWithMode0750) {
  const std::string dir = root_ + "/run/vaed";
  ASSERT_TRUE(PrepareSocketDirectory(dir + "/vaed.sock", std::nullopt).ok());
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0750u);
}

TEST_F(SocketDirectoryTest, RefusesADirectoryOpenToOtherUsers) {
  ASSERT_EQ(chmod(root_.c_str(), 0755), 0);
  const Status s = PrepareSocketDirectory(root_ + "/vaed.sock", std::nullopt);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("mode 0755"));
  EXPECT_THAT(s.message(), HasSubstr("chmod o-rwx"));
  ASSERT_EQ(chmod(root_.c_str(), 0750), 0);
  EXPECT_TRUE(PrepareSocketDirectory(root_ + "/vaed.sock", std::nullopt).ok());
}

TEST_F(SocketDirectoryTest, RefusesASymlinkedDirectory) {
  const std::string real = root_ + "/real", link = root_ + "/link";
  ASSERT_EQ(mkdir(real.c_str(), 0750), 0);
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  const Status s = PrepareSocketDirectory(link + "/vaed.sock", std::nullopt);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("symbolic link"));
}

// --------------------------------------------------------- RequestHandler

// Accepts jobs and keeps them; the test completes them.
class HoldingSink : public JobSink {
 public:
  Status Submit(std::unique_ptr<engine::DecodeJob> job) override {
    jobs.push_back(std::move(job));
    return Status::Ok();
  }
  size_t CancelClient(uint64_t client_id, const Status& why) override {
    size_t n = 0;
    for (auto& j : jobs) {
      if (j->client_id == client_id) {
        j->cancel->Cancel(why);
        ++n;
      }
    }
    cancelled_clients.push_back(client_id);
    return n;
  }
  size_t queue_depth() const override { return jobs.size(); }

  std::vector<std::unique_ptr<engine::DecodeJob>> jobs;
  std::vector<uint64_t> cancelled_clients;
};

// A job of `client_id` on the demo model, as the executor would answer it.
engine::DecodeJob JobOf(uint64_t client_id);

models::ModelRegistry* DemoRegistry() {
  static models::ModelRegistry* registry = [] {
    models::ModelConfig demo;
    demo.name = "demo";
    demo.kind = models::ModelKind::kDemo;
    auto r = models::ModelRegistry::Create({demo}, "demo");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? std::move(r).value().release() : nullptr;
  }();
  return registry;
}

engine::DecodeJob JobOf(uint64_t client_id) {
  engine::DecodeJob job;
  job.client_id = client_id;
  job.request_id = 1;
  job.model = DemoRegistry()->Find("demo");
  return job;
}

const std::vector<int64_t> kLatentShape = {1, 32, 4, 4};
const std::vector<int64_t> kOutputShape = {1, 32, 32, 3};
constexpr uint64_t kLatentBytes = 32 * 4 * 4 * 4;
constexpr uint64_t kOutputBytes = 32 * 32 * 3;

class RequestHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(DemoRegistry(), nullptr);
    options_.quarantine.fault_threshold = 5;
    options_.quarantine.window_ms = 60000;
    options_.quarantine.duration_ms = 30000;
    Rebuild();
  }

  void Rebuild() {
    auto access = AccessPolicy::Create({}, {}, {});
    ASSERT_TRUE(access.ok());
    access_ = std::move(access).value();
    handler_ = std::make_unique<RequestHandler>(options_, DemoRegistry(), &sink_, &access_,
                                                [](int32_t) { return true; }, facts_);
  }

  // A peer of this test's uid with a made-up pid (distinct processes).
  static PeerCredentials Peer(int32_t pid, uint32_t uid = static_cast<uint32_t>(geteuid())) {
    return {uid, static_cast<uint32_t>(getegid()), pid};
  }

  std::optional<v1::Reply> Send(const std::string& routing, const PeerCredentials& peer,
                                const std::string& bytes, uint64_t oversized_bytes = 0) {
    Incoming in;
    in.routing_id = routing;
    in.peer = peer;
    in.payload = bytes;
    in.oversized_bytes = oversized_bytes;
    return handler_->Handle(in, Clock::now());
  }

  std::optional<v1::Reply> Send(const std::string& routing, const PeerCredentials& peer,
                                v1::Request req) {
    if (req.request_id() == 0) req.set_request_id(++next_request_id_);
    return Send(routing, peer, req.SerializeAsString());
  }

  // Hello from `routing`; returns the client id (0 on error).
  uint64_t Hello(const std::string& routing, const PeerCredentials& peer) {
    v1::Request req;
    req.mutable_hello()->set_protocol_version(kProtocolVersion);
    req.mutable_hello()->set_client_name("worker-" + routing);
    req.mutable_hello()->set_pid(peer.pid);
    auto reply = Send(routing, peer, req);
    if (!reply || !reply->has_hello()) return 0;
    return reply->hello().client_id();
  }

  Result<uint64_t> Register(const std::string& routing, const PeerCredentials& peer,
                            uint64_t client, const std::string& name, uint64_t bytes) {
    v1::Request req;
    req.set_client_id(client);
    req.mutable_register_region()->mutable_host()->set_name(name);
    req.mutable_register_region()->mutable_host()->set_size_bytes(bytes);
    auto reply = Send(routing, peer, req);
    if (reply->has_error()) return FromProtoError(reply->error());
    return reply->register_region().region_id();
  }

  v1::Request Decode(uint64_t client, uint64_t in_id, uint64_t out_id) {
    v1::Request req;
    req.set_client_id(client);
    v1::Decode* d = req.mutable_decode();
    ToProto(TensorRef{in_id, 0, kLatentBytes, DType::kFloat32, kLatentShape}, d->mutable_latent());
    ToProto(TensorRef{out_id, 0, kOutputBytes, DType::kUInt8, kOutputShape}, d->mutable_output());
    return req;
  }

  static Status ErrorOf(const std::optional<v1::Reply>& r) {
    if (!r) return Internal("no reply (became a job)");
    if (!r->has_error()) return Status::Ok();
    return FromProtoError(r->error());
  }

  v1::StatusReply StatusNow() {
    v1::StatusReply s;
    handler_->FillStatus(&s, Clock::now());
    return s;
  }

  // Two shm segments this process owns, named with the required prefix.
  struct Regions {
    std::unique_ptr<client::SharedRegion> in, out;
  };
  Regions MakeRegions() {
    auto in = client::SharedRegion::Create(kLatentBytes);
    auto out = client::SharedRegion::Create(kOutputBytes);
    EXPECT_TRUE(in.ok() && out.ok());
    return {std::move(in).value(), std::move(out).value()};
  }

  // A client of process `pid` on connection `routing` (Hello), with a
  // latent region and an output region registered: ids nullopt when a
  // registration failed.
  struct Session {
    PeerCredentials peer;
    uint64_t client = 0;
    Regions regions;
    std::optional<uint64_t> in, out;
  };
  Session OpenSession(const std::string& routing, int32_t pid) {
    Session s{.peer = Peer(pid), .client = 0, .regions = MakeRegions(), .in = {}, .out = {}};
    s.client = Hello(routing, s.peer);
    auto in = Register(routing, s.peer, s.client, s.regions.in->name(), kLatentBytes);
    auto out = Register(routing, s.peer, s.client, s.regions.out->name(), kOutputBytes);
    if (in.ok()) s.in = *in;
    if (out.ok()) s.out = *out;
    return s;
  }

  DaemonOptions options_;
  engine::RuntimeFacts facts_;  // CPU ranks, no request memory limit unless a test sets them
  AccessPolicy access_;
  HoldingSink sink_;
  std::unique_ptr<RequestHandler> handler_;
  uint64_t next_request_id_ = 0;
};

TEST_F(RequestHandlerTest, RequestBeforeHelloIsUnknownClientAndNotAFault) {
  v1::Request req;
  req.set_client_id(99);
  req.mutable_status();
  const Status s = ErrorOf(Send("a", Peer(100), req));
  EXPECT_EQ(s.code(), StatusCode::kUnknownClient);
  EXPECT_THAT(s.message(), HasSubstr("send Hello first"));
  EXPECT_EQ(StatusNow().client_faults(), 0u);
}

TEST_F(RequestHandlerTest, FloodOfInvalidRequestsQuarantinesThatProcessOnly) {
  const PeerCredentials bad = Peer(100), good = Peer(200);
  const uint64_t bad_client = Hello("bad", bad);
  ASSERT_NE(bad_client, 0u);
  Regions r = MakeRegions();
  ASSERT_TRUE(Register("bad", bad, bad_client, r.in->name(), kLatentBytes).ok());
  // Five garbage messages: the fifth trips the threshold.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(ErrorOf(Send("bad", bad, std::string(11, '\xff'))).code(),
              StatusCode::kProtocolError);
  }
  v1::StatusReply status = StatusNow();
  EXPECT_EQ(status.client_faults(), 5u);
  ASSERT_EQ(status.quarantined_size(), 1);
  EXPECT_EQ(status.quarantined(0).pid(), 100);
  EXPECT_THAT(status.quarantined(0).last_fault(), HasSubstr("protocol:"));
  // Its client is dropped: regions unmapped, work cancelled.
  EXPECT_EQ(status.regions(), 0u);
  EXPECT_EQ(sink_.cancelled_clients, std::vector<uint64_t>{bad_client});
  // Every request of it is refused, with a retry-after, even a new Hello.
  v1::Request hello;
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  const Status q = ErrorOf(Send("bad2", bad, hello));
  EXPECT_EQ(q.code(), StatusCode::kQuarantined);
  EXPECT_GT(q.retry_after_ms(), 29000u);
  EXPECT_LE(q.retry_after_ms(), 30001u);
  // Its client was dropped: a heartbeat is answered unknown_client (the
  // client library's cue to say Hello again, which stays refused until the
  // quarantine ends).
  v1::Request heartbeat;
  heartbeat.set_client_id(bad_client);
  heartbeat.mutable_heartbeat();
  EXPECT_EQ(ErrorOf(Send("bad", bad, heartbeat)).code(), StatusCode::kUnknownClient);
  EXPECT_EQ(StatusNow().clients(), 0u);
  // Another process is served as before.
  const uint64_t good_client = Hello("good", good);
  ASSERT_NE(good_client, 0u);
  Regions g = MakeRegions();
  auto in = Register("good", good, good_client, g.in->name(), kLatentBytes);
  auto out = Register("good", good, good_client, g.out->name(), kOutputBytes);
  ASSERT_TRUE(in.ok() && out.ok()) << in.status().ToString();
  EXPECT_FALSE(Send("good", good, Decode(good_client, *in, *out)).has_value());  // a job
  EXPECT_EQ(sink_.jobs.size(), 1u);
  EXPECT_EQ(StatusNow().quarantine_rejections(), 1u);
}

TEST_F(RequestHandlerTest, ReleaseNeedsAnAdminAndLiftsTheQuarantine) {
  const PeerCredentials bad = Peer(100);
  for (int i = 0; i < 5; ++i) Send("bad", bad, std::string("junk"));
  ASSERT_EQ(StatusNow().quarantined_size(), 1);
  v1::Request release;
  release.mutable_release_quarantine()->set_client("pid:100");
  // A peer that is neither root, the daemon's uid nor an admin uid.
  const Status denied = ErrorOf(Send("x", Peer(300, 54321), release));
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.message(), HasSubstr("uid 54321"));
  auto ok = Send("op", Peer(301), release);
  ASSERT_TRUE(ok && ok->has_release_quarantine()) << ErrorOf(ok).ToString();
  ASSERT_EQ(ok->release_quarantine().released_size(), 1);
  EXPECT_EQ(ok->release_quarantine().released(0).pid(), 100);
  EXPECT_EQ(StatusNow().quarantined_size(), 0);
  EXPECT_NE(Hello("bad", bad), 0u);
  // Nothing left to release: a clear not_found.
  EXPECT_EQ(ErrorOf(Send("op", Peer(301), release)).code(), StatusCode::kNotFound);
}

TEST_F(RequestHandlerTest, ReleaseByTheClientIdItHadAndMalformedTargets) {
  const PeerCredentials bad = Peer(100);
  const uint64_t id = Hello("bad", bad);
  for (int i = 0; i < 5; ++i) Send("bad", bad, std::string(11, '\xff'));
  ASSERT_EQ(StatusNow().quarantined_size(), 1);
  v1::Request release;
  release.mutable_release_quarantine()->set_client("pid:abc");
  const Status malformed = ErrorOf(Send("op", Peer(301), release));
  EXPECT_EQ(malformed.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(malformed.message(), HasSubstr("malformed"));
  // The client id is gone from the registry, but names the process.
  release.mutable_release_quarantine()->set_client(std::to_string(id));
  auto ok = Send("op", Peer(301), release);
  ASSERT_TRUE(ok && ok->has_release_quarantine()) << ErrorOf(ok).ToString();
  EXPECT_EQ(ok->release_quarantine().released_size(), 1);
  EXPECT_EQ(StatusNow().quarantined_size(), 0);
}

TEST_F(RequestHandlerTest, HelloAgainReplacesTheClientAndProcessesAreCapped) {
  options_.server.max_clients_per_process = 3;
  Rebuild();
  const PeerCredentials p = Peer(100);
  // Many Hellos on one connection: one client at a time.
  uint64_t last = 0;
  for (int i = 0; i < 10; ++i) last = Hello("a", p);
  EXPECT_NE(last, 0u);
  EXPECT_EQ(StatusNow().clients(), 1u);
  EXPECT_EQ(StatusNow().client_faults(), 0u);
  // Three connections of one process are allowed, a fourth is not.
  EXPECT_NE(Hello("b", p), 0u);
  EXPECT_NE(Hello("c", p), 0u);
  v1::Request hello;
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  const Status capped = ErrorOf(Send("d", p, hello));
  EXPECT_EQ(capped.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(capped.message(), HasSubstr("server.max_clients_per_process = 3"));
  EXPECT_EQ(StatusNow().client_faults(), 1u);
  // Another process is not limited by it.
  EXPECT_NE(Hello("e", Peer(200)), 0u);
}

TEST_F(RequestHandlerTest, ADroppedReplyIsAQuotaFaultOfThatClient) {
  const PeerCredentials p = Peer(100);
  Hello("a", p);
  handler_->OnReplyDropped("a", Clock::now());
  handler_->OnReplyDropped("nobody", Clock::now());
  EXPECT_EQ(handler_->dropped_replies(), 2u);
  EXPECT_EQ(handler_->quarantine().FaultsInWindow({p.uid, p.pid}, Clock::now()), 1u);
  EXPECT_EQ(handler_->quarantine().faults(FaultKind::kQuota), 1u);
}

TEST_F(RequestHandlerTest, InFlightLimitAnswersBusyAndCountsAFault) {
  options_.server.max_in_flight_per_client = 2;
  Rebuild();
  auto [p, c, r, in, out] = OpenSession("a", 100);
  ASSERT_TRUE(in && out);
  EXPECT_FALSE(Send("a", p, Decode(c, *in, *out)).has_value());
  EXPECT_FALSE(Send("a", p, Decode(c, *in, *out)).has_value());
  const Status busy = ErrorOf(Send("a", p, Decode(c, *in, *out)));
  EXPECT_EQ(busy.code(), StatusCode::kBusy);
  EXPECT_GT(busy.retry_after_ms(), 0u);
  EXPECT_THAT(busy.message(), HasSubstr("server.max_in_flight_per_client = 2"));
  EXPECT_EQ(StatusNow().client_faults(), 1u);
  EXPECT_EQ(StatusNow().busy_rejections(), 1u);
  // A reply frees a slot.
  handler_->OnJobDone(*sink_.jobs.front(), engine::DecodeResult{}, Clock::now());
  EXPECT_FALSE(Send("a", p, Decode(c, *in, *out)).has_value());
}

TEST_F(RequestHandlerTest, RegionNamesNeedThePrefixAndNoPathParts) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  auto other = Register("a", p, c, "other-name", 16);
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr("server.region_prefix"));
  auto traversal = Register("a", p, c, "vaed-../../etc/passwd", 16);
  EXPECT_EQ(traversal.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(traversal.status().message(), HasSubstr("register_region.host.name"));
  EXPECT_THAT(traversal.status().message(), HasSubstr("'/'"));
  EXPECT_EQ(StatusNow().client_faults(), 2u);
}

TEST_F(RequestHandlerTest, ASegmentIsNeverSharedBetweenProcesses) {
  const PeerCredentials a = Peer(100), b = Peer(200);
  const uint64_t ca = Hello("a", a), cb = Hello("b", b);
  Regions r = MakeRegions();
  auto ra = Register("a", a, ca, r.in->name(), kLatentBytes);
  ASSERT_TRUE(ra.ok());
  auto rb = Register("b", b, cb, r.in->name(), kLatentBytes);
  EXPECT_EQ(rb.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(rb.status().message(), HasSubstr("registered by another process"));
  // Nor can B name A's region id.
  auto out = Register("b", b, cb, r.out->name(), kOutputBytes);
  ASSERT_TRUE(out.ok());
  const Status s = ErrorOf(Send("b", b, Decode(cb, *ra, *out)));
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("latent.region_id"));
  // A second client of the same process may register it (a reconnect).
  const uint64_t ca2 = Hello("a2", a);
  EXPECT_TRUE(Register("a2", a, ca2, r.in->name(), kLatentBytes).ok());
}

// Regression (listed in tests/regressions/README.md; kept here because it
// needs this fixture's handler and sink). Bug, found by the fuzzer
// (fuzz/regressions/alias-output-overlaps-latent-via-second-registration.bin):
// two registrations of one segment gave two region ids, and the overlap
// check compared ids, so an output could overwrite the latent it was
// decoded from. Fixed in 8c25595: the check compares segments
// (HostRegion::SameSegment).
TEST_F(RequestHandlerTest, RegressionOutputMayNotOverlapTheLatentThroughASecondRegistration) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  auto segment = client::SharedRegion::Create(kOutputBytes);
  ASSERT_TRUE(segment.ok());
  auto first = Register("a", p, c, (*segment)->name(), kOutputBytes);
  auto second = Register("a", p, c, (*segment)->name(), kOutputBytes);
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_NE(*first, *second);
  const Status s = ErrorOf(Send("a", p, Decode(c, *first, *second)));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("output bytes [0, 3072) overlap latent bytes [0, 2048)"));
  EXPECT_THAT(s.message(), HasSubstr("map the same segment"));
  EXPECT_TRUE(sink_.jobs.empty());
}

// ------------------------------------------- region lifetime (client_registry.h)

v1::Request UnregisterRequest(uint64_t client, uint64_t region_id) {
  v1::Request req;
  req.set_client_id(client);
  req.mutable_unregister_region()->set_region_id(region_id);
  return req;
}

TEST_F(RequestHandlerTest, AnUnregisterWaitsForTheLastDecodeUsingTheRegion) {
  auto [p, c, r, in, out] = OpenSession("a", 100);
  ASSERT_TRUE(in && out);
  ASSERT_FALSE(Send("a", p, Decode(c, *in, *out)).has_value());
  ASSERT_FALSE(Send("a", p, Decode(c, *in, *out)).has_value());
  ASSERT_EQ(sink_.jobs.size(), 2u);

  // In use by both: no reply now, the region still counts as registered.
  v1::Request unregister = UnregisterRequest(c, *out);
  unregister.set_request_id(500);
  EXPECT_FALSE(Send("a", p, unregister).has_value());
  EXPECT_EQ(StatusNow().regions(), 2u);
  // A new decode naming it is refused, naming the field and the rule.
  const Status refused = ErrorOf(Send("a", p, Decode(c, *in, *out)));
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("output.region_id " + std::to_string(*out)));
  EXPECT_THAT(refused.message(),
              HasSubstr("region " + std::to_string(*out) + " is being unregistered"));
  // So is a second unregister of it; the first one's reply will come.
  const Status again = ErrorOf(Send("a", p, UnregisterRequest(c, *out)));
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("unregister_region.region_id"));
  EXPECT_THAT(again.message(), HasSubstr("request 500"));
  // The latent region is not affected: an unregister of an idle region is
  // answered at once (here, after registering a third).
  auto idle = client::SharedRegion::Create(64);
  ASSERT_TRUE(idle.ok());
  auto idle_id = Register("a", p, c, (*idle)->name(), 64);
  ASSERT_TRUE(idle_id.ok());
  auto idle_reply = Send("a", p, UnregisterRequest(c, *idle_id));
  ASSERT_TRUE(idle_reply && idle_reply->has_unregister_region()) << ErrorOf(idle_reply).ToString();

  // The first decode ends: the other still uses the region.
  RequestHandler::JobReplies first =
      handler_->OnJobDone(*sink_.jobs[0], engine::DecodeResult{}, Clock::now());
  EXPECT_EQ(first.decode.request_id(), sink_.jobs[0]->request_id);
  EXPECT_TRUE(first.unregistered.empty());
  EXPECT_EQ(StatusNow().regions(), 2u);
  // The last one ends (failing makes no difference): the unregister is
  // answered after its reply, and the region is gone.
  RequestHandler::JobReplies last =
      handler_->OnJobDone(*sink_.jobs[1], Internal("torch error"), Clock::now());
  EXPECT_TRUE(last.decode.has_error());
  ASSERT_EQ(last.unregistered.size(), 1u);
  EXPECT_EQ(last.unregistered[0].request_id(), 500u);
  EXPECT_TRUE(last.unregistered[0].has_unregister_region());
  EXPECT_FALSE(last.unregistered[0].has_error());
  EXPECT_EQ(StatusNow().regions(), 1u);
  EXPECT_EQ(ErrorOf(Send("a", p, Decode(c, *in, *out))).code(), StatusCode::kNotFound);
}

TEST_F(RequestHandlerTest,
       AClientThatGoesWhileAnUnregisterWaitsGetsNoReplyAndTheJobKeepsItsMapping) {
  auto [p, c, r, in, out] = OpenSession("a", 100);
  ASSERT_TRUE(in && out);
  ASSERT_FALSE(Send("a", p, Decode(c, *in, *out)).has_value());
  EXPECT_FALSE(Send("a", p, UnregisterRequest(c, *in)).has_value());
  v1::Request bye;
  bye.set_client_id(c);
  bye.mutable_goodbye();
  auto goodbye = Send("a", p, bye);
  ASSERT_TRUE(goodbye && goodbye->has_goodbye());
  EXPECT_EQ(StatusNow().regions(), 0u);
  ASSERT_EQ(sink_.jobs.size(), 1u);
  const engine::DecodeJob& job = *sink_.jobs[0];
  EXPECT_EQ(job.cancel->Check("").code(), StatusCode::kCancelled);
  // The registry let go; the job alone holds the mappings until it ends.
  EXPECT_EQ(job.video->latent_region.use_count(), 1);
  EXPECT_EQ(job.video->output_region.use_count(), 1);
  RequestHandler::JobReplies done =
      handler_->OnJobDone(job, Cancelled("client said goodbye"), Clock::now());
  EXPECT_TRUE(done.unregistered.empty());
}

TEST_F(RequestHandlerTest, ASegmentOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown a segment to another uid";
  Regions r = MakeRegions();
  const std::string path = "/dev/shm/" + r.in->name();
  ASSERT_EQ(chown(path.c_str(), 4321, 4321), 0);
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  auto reg = Register("a", p, c, r.in->name(), kLatentBytes);
  EXPECT_EQ(reg.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(reg.status().message(), HasSubstr("owned by uid 4321"));
}

TEST_F(RequestHandlerTest, RegionCountAndByteQuotas) {
  options_.server.max_regions_per_client = 2;
  options_.server.max_region_bytes_per_client = kLatentBytes + kOutputBytes;
  Rebuild();
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  Regions r = MakeRegions();
  ASSERT_TRUE(Register("a", p, c, r.in->name(), kLatentBytes).ok());
  // Bytes: one more byte than the quota allows.
  auto over = Register("a", p, c, r.out->name(), kOutputBytes + 1);
  EXPECT_EQ(over.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(over.status().message(), HasSubstr("server.max_region_bytes_per_client"));
  ASSERT_TRUE(Register("a", p, c, r.out->name(), kOutputBytes).ok());
  auto third = Register("a", p, c, r.in->name(), 1);
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("server.max_regions_per_client = 2"));
  EXPECT_EQ(StatusNow().client_faults(), 2u);
}

// CUDA IPC regions through the handler, without a device: the
// daemon is given two CUDA rank devices and a fake opener that records
// which device it opened on and counts the regions it closed.
class CudaRegionTest : public RequestHandlerTest {
 protected:
  static constexpr const char* kUuid0 = "GPU-00000000-0000-0000-0000-0000000000a0";
  static constexpr const char* kUuid1 = "GPU-00000000-0000-0000-0000-0000000000a1";

  // Stands for an opened allocation; counts its close.
  class FakeRegion final : public CudaRegion {
   public:
    FakeRegion(uint64_t size, int device, std::string handle, int* closes,
               std::shared_ptr<std::set<std::string>> mapped)
        : size_(size),
          device_(device),
          handle_(std::move(handle)),
          closes_(closes),
          mapped_(std::move(mapped)) {}
    ~FakeRegion() override { Close(); }
    void* data() const override { return nullptr; }
    uint64_t size() const override { return size_; }
    uint64_t allocation_bytes() const override { return closed_ ? 0 : kAllocationBytes; }
    int device() const override { return device_; }
    const std::string& handle() const override { return handle_; }
    void Close() override {
      if (!closed_) {
        ++*closes_;
        mapped_->erase(handle_);
      }
      closed_ = true;
    }

   private:
    bool closed_ = false;
    uint64_t size_;
    int device_;
    std::string handle_;
    int* closes_;
    std::shared_ptr<std::set<std::string>> mapped_;  // the fixture's
  };

  void SetUp() override {
    RequestHandlerTest::SetUp();
    for (int i = 0; i < 2; ++i) {
      engine::RankDevice d;
      d.is_cuda = true;
      d.cuda.ordinal = i;
      d.cuda.uuid = *ParseDeviceUuid(i == 0 ? kUuid0 : kUuid1, "test");
      d.cuda.name = "fake";
      facts_.rank_devices.push_back(d);
    }
    Rebuild();
  }
  // The registry's regions count their closes into closes_: the handler
  // goes before this fixture's members.
  void TearDown() override { handler_.reset(); }
  void Rebuild() {
    RequestHandlerTest::Rebuild();
    handler_->set_cuda_region_opener(
        [this](const v1::CudaIpcRegion& r,
               const engine::CudaDevice& device) -> Result<std::shared_ptr<CudaRegion>> {
          ++opens_;
          opened_on_.push_back(device.ordinal);
          if (r.size_bytes() > kAllocationBytes) {
            return OutOfRange("client claims " + std::to_string(r.size_bytes()) +
                              " bytes but the allocation holds " +
                              std::to_string(kAllocationBytes));
          }
          // What CUDA answers a process that opens a handle it has mapped
          // already (CUDA_ERROR_ALREADY_MAPPED).
          if (!mapped_->insert(r.ipc_handle()).second) {
            return Internal("cudaIpcOpenMemHandle: resource already mapped (cuda error 208)");
          }
          return std::shared_ptr<CudaRegion>(std::make_shared<FakeRegion>(
              r.size_bytes(), device.ordinal, r.ipc_handle(), &closes_, mapped_));
        });
  }

  Result<uint64_t> RegisterCuda(const std::string& routing, const PeerCredentials& peer,
                                uint64_t client, char handle_byte, uint64_t bytes,
                                const std::string& uuid = kUuid1, size_t handle_size = 64) {
    v1::Request req;
    req.set_client_id(client);
    v1::CudaIpcRegion* cuda = req.mutable_register_region()->mutable_cuda();
    cuda->set_ipc_handle(std::string(handle_size, handle_byte));
    cuda->set_size_bytes(bytes);
    cuda->set_device_uuid(uuid);
    auto reply = Send(routing, peer, req);
    if (reply->has_error()) return FromProtoError(reply->error());
    return reply->register_region().region_id();
  }

  static constexpr uint64_t kAllocationBytes = 1 << 20;
  int opens_ = 0;
  int closes_ = 0;
  std::vector<int> opened_on_;
  // Handles the fake driver has open; shared with the regions, which the
  // base fixture's members (handler, sink) destroy after this fixture's.
  std::shared_ptr<std::set<std::string>> mapped_ = std::make_shared<std::set<std::string>>();
};

// Two tensors of one caching-allocator segment share its IPC handle: the
// second registration must reuse the mapping (CUDA refuses to map a handle
// twice in one process), and the mapping stays open until the last region
// on it is unregistered.
TEST_F(CudaRegionTest, TwoRegionsOnOneAllocationShareOneMapping) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  auto latent = RegisterCuda("a", p, c, 's', 4096);
  ASSERT_TRUE(latent.ok()) << latent.status().ToString();
  auto output = RegisterCuda("a", p, c, 's', 8192);
  ASSERT_TRUE(output.ok()) << output.status().ToString();
  EXPECT_NE(*latent, *output);
  EXPECT_EQ(opens_, 1);
  EXPECT_EQ(StatusNow().regions(), 2u);
  auto reply = Send("a", p, UnregisterRequest(c, *latent));
  ASSERT_TRUE(reply && reply->has_unregister_region()) << ErrorOf(reply).ToString();
  EXPECT_EQ(closes_, 0);  // still lent through the other region
  reply = Send("a", p, UnregisterRequest(c, *output));
  ASSERT_TRUE(reply && reply->has_unregister_region()) << ErrorOf(reply).ToString();
  EXPECT_EQ(closes_, 1);
  // Mapped again from scratch once the last region on it went.
  ASSERT_TRUE(RegisterCuda("a", p, c, 's', 4096).ok());
  EXPECT_EQ(opens_, 2);
}

TEST_F(CudaRegionTest, ALaterRegionOnASharedAllocationIsCheckedAgainstItsSize) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  ASSERT_TRUE(RegisterCuda("a", p, c, 's', 4096).ok());
  auto too_big = RegisterCuda("a", p, c, 's', kAllocationBytes + 1);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kOutOfRange);
  EXPECT_THAT(too_big.status().message(), HasSubstr("register_region.cuda.size_bytes"));
  auto other_device = RegisterCuda("a", p, c, 's', 4096, kUuid0);
  ASSERT_FALSE(other_device.ok());
  EXPECT_THAT(other_device.status().message(), HasSubstr("register_region.cuda.device_uuid"));
  EXPECT_EQ(opens_, 1);
}

TEST_F(CudaRegionTest, HelloListsTheRankDevicesInRankOrder) {
  v1::Request req;
  req.mutable_hello()->set_protocol_version(kProtocolVersion);
  auto reply = Send("a", Peer(100), req);
  ASSERT_TRUE(reply && reply->has_hello());
  EXPECT_THAT(reply->hello().cuda_devices(), ::testing::ElementsAre(kUuid0, kUuid1));
}

TEST_F(CudaRegionTest, OpenedOnceOnTheNamedRankDeviceAndClosedOnUnregister) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  auto id = RegisterCuda("a", p, c, 'h', 4096);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(opens_, 1);
  EXPECT_THAT(opened_on_, ::testing::ElementsAre(1));  // kUuid1 is rank 1's device
  EXPECT_EQ(StatusNow().regions(), 1u);
  EXPECT_EQ(closes_, 0);
  auto reply = Send("a", p, UnregisterRequest(c, *id));
  ASSERT_TRUE(reply && reply->has_unregister_region()) << ErrorOf(reply).ToString();
  EXPECT_EQ(closes_, 1);  // unmapped before the acknowledgement went out
  EXPECT_EQ(StatusNow().regions(), 0u);
}

TEST_F(CudaRegionTest, ClosedWhenTheClientGoes) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  ASSERT_TRUE(RegisterCuda("a", p, c, 'h', 4096).ok());
  ASSERT_TRUE(RegisterCuda("a", p, c, 'i', 4096, kUuid0).ok());
  v1::Request bye;
  bye.set_client_id(c);
  bye.mutable_goodbye();
  auto goodbye = Send("a", p, bye);
  ASSERT_TRUE(goodbye && goodbye->has_goodbye());
  EXPECT_EQ(closes_, 2);
}

TEST_F(CudaRegionTest, OneHandleIsNeverLentByTwoProcessesAndIdsStayPerClient) {
  const PeerCredentials a = Peer(100), b = Peer(200);
  const uint64_t ca = Hello("a", a), cb = Hello("b", b);
  auto ra = RegisterCuda("a", a, ca, 'h', 4096);
  ASSERT_TRUE(ra.ok());
  auto rb = RegisterCuda("b", b, cb, 'h', 4096);
  EXPECT_EQ(rb.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(rb.status().message(), HasSubstr("register_region.cuda.ipc_handle"));
  EXPECT_THAT(rb.status().message(), HasSubstr("another process"));
  EXPECT_EQ(opens_, 1);  // refused before opening
  // B cannot name A's region id either.
  Regions r = MakeRegions();
  auto out = Register("b", b, cb, r.out->name(), kOutputBytes);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(ErrorOf(Send("b", b, Decode(cb, *ra, *out))).code(), StatusCode::kNotFound);
  // The same process may register it again (a reconnect re-registers).
  const uint64_t ca2 = Hello("a2", a);
  EXPECT_TRUE(RegisterCuda("a2", a, ca2, 'h', 4096).ok());
}

TEST_F(CudaRegionTest, ADeviceNoRankDecodesOnIsRefusedListingTheRanksDevices) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  auto r = RegisterCuda("a", p, c, 'h', 4096, "GPU-00000000-0000-0000-0000-0000000000ff");
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("register_region.cuda.device_uuid"));
  EXPECT_THAT(r.status().message(), HasSubstr(std::string(kUuid0) + ", " + kUuid1));
  EXPECT_EQ(opens_, 0);
}

TEST_F(CudaRegionTest, MalformedArgumentsAreNamedBeforeAnythingOpens) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  auto short_handle = RegisterCuda("a", p, c, 'h', 4096, kUuid1, 10);
  EXPECT_EQ(short_handle.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(short_handle.status().message(), HasSubstr("register_region.cuda"));
  auto empty = RegisterCuda("a", p, c, 'h', 0);
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  auto bad_uuid = RegisterCuda("a", p, c, 'h', 4096, "cuda:0");
  EXPECT_EQ(bad_uuid.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(opens_, 0);
}

TEST_F(CudaRegionTest, TheOpenersSizeCheckAndTheQuotasApply) {
  options_.server.max_region_bytes_per_client = 8192;
  Rebuild();
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  EXPECT_EQ(RegisterCuda("a", p, c, 'h', kAllocationBytes + 1).status().code(),
            StatusCode::kResourceExhausted);  // the byte quota first
  options_.server.max_region_bytes_per_client = uint64_t{1} << 40;
  Rebuild();
  const uint64_t c2 = Hello("b", p);
  auto over = RegisterCuda("b", p, c2, 'h', kAllocationBytes + 1);
  EXPECT_EQ(over.status().code(), StatusCode::kOutOfRange);
  EXPECT_THAT(over.status().message(), HasSubstr("client claims"));
  EXPECT_EQ(closes_, 0);
}

TEST_F(CudaRegionTest, ADecodeMayMixCudaAndHostRegions) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  auto in = RegisterCuda("a", p, c, 'h', kLatentBytes);
  Regions r = MakeRegions();
  auto out = Register("a", p, c, r.out->name(), kOutputBytes);
  ASSERT_TRUE(in.ok() && out.ok());
  EXPECT_FALSE(Send("a", p, Decode(c, *in, *out)).has_value());  // a job
  ASSERT_EQ(sink_.jobs.size(), 1u);
  const engine::VideoPart& video = *sink_.jobs[0]->video;
  EXPECT_NE(video.latent_cuda, nullptr);
  EXPECT_EQ(video.latent_region, nullptr);
  EXPECT_NE(video.output_region, nullptr);
  EXPECT_EQ(video.output_cuda, nullptr);
  // The job holds the CUDA region: an unregister now waits for it.
  EXPECT_FALSE(Send("a", p, UnregisterRequest(c, *in)).has_value());
  EXPECT_EQ(closes_, 0);
  RequestHandler::JobReplies done =
      handler_->OnJobDone(*sink_.jobs[0], engine::DecodeResult{}, Clock::now());
  ASSERT_EQ(done.unregistered.size(), 1u);
  // Closed before the acknowledgement goes out, although the finished job
  // still holds a reference.
  EXPECT_EQ(closes_, 1);
  EXPECT_EQ(video.latent_cuda.use_count(), 1);
  sink_.jobs.clear();
  EXPECT_EQ(closes_, 1);
}

TEST_F(CudaRegionTest, TensorsInCudaRegionsAreCheckedLikeHostOnes) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  Regions r = MakeRegions();
  auto host_out = Register("a", p, c, r.out->name(), kOutputBytes);
  // A latent past the end of its CUDA region.
  auto small = RegisterCuda("a", p, c, 's', kLatentBytes - 1);
  ASSERT_TRUE(small.ok() && host_out.ok());
  const Status outside = ErrorOf(Send("a", p, Decode(c, *small, *host_out)));
  EXPECT_EQ(outside.code(), StatusCode::kOutOfRange);
  EXPECT_THAT(outside.message(), HasSubstr("latent: bytes [0"));
  // One allocation registered twice: the output may not overlap the latent.
  auto first = RegisterCuda("a", p, c, 'h', kLatentBytes + kOutputBytes);
  auto second = RegisterCuda("a", p, c, 'h', kLatentBytes + kOutputBytes);
  ASSERT_TRUE(first.ok() && second.ok());
  const Status overlap = ErrorOf(Send("a", p, Decode(c, *first, *second)));
  EXPECT_EQ(overlap.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(overlap.message(), HasSubstr("overlap latent"));
  EXPECT_THAT(overlap.message(), HasSubstr("CUDA allocation"));
  EXPECT_TRUE(sink_.jobs.empty());
  // An event with a CUDA latent passes its own check and travels with the
  // job to the rank, which waits on it before reading the latent.
  v1::Request req = Decode(c, *first, *host_out);
  req.mutable_decode()->set_inputs_ready_event(std::string(64, 'e'));
  EXPECT_FALSE(Send("a", p, req).has_value());  // a job
  ASSERT_EQ(sink_.jobs.size(), 1u);
  EXPECT_EQ(sink_.jobs[0]->inputs_ready_event, std::string(64, 'e'));
  // With a host latent and a CUDA output too: the event orders the
  // worker's earlier use of the output memory before the rank's writes.
  auto host_in = Register("a", p, c, r.in->name(), kLatentBytes);
  auto cuda_out = RegisterCuda("a", p, c, 'o', kOutputBytes);
  ASSERT_TRUE(host_in.ok() && cuda_out.ok());
  req = Decode(c, *host_in, *cuda_out);
  req.mutable_decode()->set_inputs_ready_event(std::string(64, 'f'));
  EXPECT_FALSE(Send("a", p, req).has_value());  // a job
  ASSERT_EQ(sink_.jobs.size(), 2u);
  EXPECT_EQ(sink_.jobs[1]->inputs_ready_event, std::string(64, 'f'));
}

// Decode.inputs_ready_event is never ignored: malformed, it is named with
// its size rule; well formed, it is refused when every tensor is in a host
// region (it would order nothing there).
TEST_F(RequestHandlerTest, AnInputsReadyEventIsCheckedAndRefusedForHostLatents) {
  auto [p, c, r, in, out] = OpenSession("a", 100);
  ASSERT_TRUE(in && out);
  v1::Request req = Decode(c, *in, *out);
  req.mutable_decode()->set_inputs_ready_event(std::string(10, 'e'));
  const Status short_event = ErrorOf(Send("a", p, req));
  EXPECT_EQ(short_event.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(short_event.message(), HasSubstr("inputs_ready_event has 10 bytes"));
  req = Decode(c, *in, *out);
  req.mutable_decode()->set_inputs_ready_event(std::string(64, 'e'));
  const Status host = ErrorOf(Send("a", p, req));
  EXPECT_EQ(host.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(host.message(), HasSubstr("host regions"));
  EXPECT_TRUE(sink_.jobs.empty());
}

TEST_F(RequestHandlerTest, LatentSpaceIsCheckedAgainstTheModelAndTravelsWithTheJob) {
  auto [p, c, r, in, out] = OpenSession("a", 100);
  ASSERT_TRUE(in && out);
  v1::Request req = Decode(c, *in, *out);
  req.mutable_decode()->set_latent_space(v1::LATENT_SPACE_DENORMALIZED);
  const Status no_normalization = ErrorOf(Send("a", p, req));
  EXPECT_EQ(no_normalization.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(no_normalization.field(), "latent_space");
  EXPECT_THAT(no_normalization.message(), HasSubstr("has no latent normalisation"));
  req = Decode(c, *in, *out);
  req.mutable_decode()->set_latent_space(static_cast<v1::LatentSpace>(9));
  const Status unknown = ErrorOf(Send("a", p, req));
  EXPECT_EQ(unknown.field(), "latent_space");
  EXPECT_THAT(unknown.message(), HasSubstr("latent_space is 9"));
  EXPECT_TRUE(sink_.jobs.empty());
  req = Decode(c, *in, *out);
  req.mutable_decode()->set_latent_space(v1::LATENT_SPACE_NORMALIZED);
  EXPECT_FALSE(Send("a", p, req).has_value());
  ASSERT_EQ(sink_.jobs.size(), 1u);
  EXPECT_EQ(sink_.jobs[0]->settings.latent_space, models::LatentSpace::kNormalized);
}

// Regression: an output of the wrong shape was
// refused with "model 'demo' writes uint8 NHWC uint8 [...]": the format's
// name already holds the dtype, and the dtype was appended again.
TEST_F(RequestHandlerTest, RegressionAWrongOutputShapeNamesTheFormatOnce) {
  auto [p, c, r, in, out] = OpenSession("a", 100);
  ASSERT_TRUE(in && out);
  v1::Request req = Decode(c, *in, *out);
  req.mutable_decode()->mutable_output()->set_size_bytes(kOutputBytes / 2);
  req.mutable_decode()->mutable_output()->set_shape(1, kOutputShape[1] / 2);
  const Status s = ErrorOf(Send("a", p, req));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("writes uint8 NHWC " + ShapeToString(kOutputShape)));
  EXPECT_THAT(s.message(), Not(HasSubstr("uint8 NHWC uint8")));
}

// Regression: status said "0 served, 8 failed"
// while its outcomes counted 4 (plan-only refusals and refusals before a
// request parsed were "failed" but no outcome), a plan refused before the
// decode was sent (the Python client plans first) was in no outcome and no
// metric, refusals were logged as free text, and protocol errors not at
// all. Now served/failed are the outcome counts, a refused plan is a
// refused request, and every refusal has a record in the log.
TEST_F(RequestHandlerTest, RegressionServedFailedAndOutcomesCountTheSameRequests) {
  testing::CapturedLog log;
  auto [p, c, r, in, out] = OpenSession("a", 100);
  ASSERT_TRUE(in && out);
  v1::Request refused_plan = Decode(c, *in, *out);
  refused_plan.mutable_decode()->set_plan_only(true);
  refused_plan.mutable_decode()->mutable_latent()->set_shape(1, 16);  // demo needs 32 channels
  EXPECT_EQ(ErrorOf(Send("a", p, refused_plan)).code(), StatusCode::kInvalidArgument);
  v1::Request plan = Decode(c, *in, *out);
  plan.mutable_decode()->set_plan_only(true);
  EXPECT_TRUE(ErrorOf(Send("a", p, plan)).ok());  // a plan answered: not a decode answered
  v1::Request refused = Decode(c, *in, *out);
  refused.mutable_decode()->mutable_output()->set_size_bytes(7);
  EXPECT_EQ(ErrorOf(Send("a", p, refused)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrorOf(Send("a", p, std::string(5, '\xff'))).code(), StatusCode::kProtocolError);

  const v1::StatusReply status = StatusNow();
  EXPECT_EQ(status.requests_served(), 0u);
  EXPECT_EQ(status.requests_failed(), 2u);
  uint64_t outcomes = 0;
  for (const v1::OutcomeCount& o : status.outcomes()) {
    if (o.outcome().find("fallback") == std::string::npos) outcomes += o.count();
  }
  EXPECT_EQ(outcomes, status.requests_served() + status.requests_failed());
  EXPECT_EQ(status.protocol_errors(), 1u);

  int decode_records = 0, refusal_records = 0;
  for (const std::string& line : log.Lines()) {
    if (line.find("decode: ") != std::string::npos) {
      ++decode_records;
      EXPECT_THAT(line, HasSubstr("outcome=validation_error")) << line;
    }
    if (line.find("refusal: ") != std::string::npos) {
      ++refusal_records;
      EXPECT_THAT(line, HasSubstr("request=unparsable")) << line;
      EXPECT_THAT(line, HasSubstr("pid=100")) << line;
    }
  }
  EXPECT_EQ(decode_records, 2);
  EXPECT_EQ(refusal_records, 1);
}

TEST_F(RequestHandlerTest, OversizedAndBodylessMessagesAreProtocolFaults) {
  const PeerCredentials p = Peer(100);
  const Status big = ErrorOf(Send("a", p, std::string(options_.server.max_message_bytes + 1, 'x')));
  EXPECT_EQ(big.code(), StatusCode::kProtocolError);
  EXPECT_THAT(big.message(), HasSubstr("server.max_message_bytes"));
  // Over the cap as the framing saw it: the payload was skipped unread.
  const Status skipped = ErrorOf(Send("a", p, "", uint64_t{3} << 30));
  EXPECT_EQ(skipped.code(), StatusCode::kProtocolError);
  EXPECT_THAT(skipped.message(), HasSubstr("message of 3221225472 bytes exceeds"));
  // A well-formed Request whose body is a field this daemon does not know.
  v1::Request unknown;
  unknown.set_request_id(5);
  std::string bytes = unknown.SerializeAsString();
  bytes += std::string("\xfa\x06\x00", 3);  // field 111, length-delimited, empty
  auto reply = Send("a", p, bytes);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->request_id(), 5u);
  EXPECT_THAT(ErrorOf(reply).message(), HasSubstr("has no body"));
  EXPECT_EQ(StatusNow().protocol_errors(), 3u);
  EXPECT_EQ(StatusNow().client_faults(), 3u);
}

TEST_F(RequestHandlerTest, AClientIdOfAnotherConnectionIsAProtocolFault) {
  const PeerCredentials a = Peer(100), b = Peer(200);
  const uint64_t ca = Hello("a", a);
  v1::Request req;
  req.set_client_id(ca);
  req.mutable_status();
  const Status s = ErrorOf(Send("b", b, req));
  EXPECT_EQ(s.code(), StatusCode::kProtocolError);
  EXPECT_THAT(s.message(), HasSubstr("belongs to another connection"));
  EXPECT_EQ(handler_->quarantine().FaultsInWindow({b.uid, b.pid}, Clock::now()), 1u);
  EXPECT_EQ(handler_->quarantine().FaultsInWindow({a.uid, a.pid}, Clock::now()), 0u);
}

TEST_F(RequestHandlerTest, DeadlineTravelsWithTheJob) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  Regions r = MakeRegions();
  auto in = Register("a", p, c, r.in->name(), kLatentBytes);
  auto out = Register("a", p, c, r.out->name(), kOutputBytes);
  v1::Request req = Decode(c, *in, *out);
  req.mutable_decode()->mutable_options()->set_deadline_ms(50);
  EXPECT_FALSE(Send("a", p, req).has_value());
  ASSERT_EQ(sink_.jobs.size(), 1u);
  const models::CancelToken& token = *sink_.jobs[0]->cancel;
  EXPECT_TRUE(token.Check("now").ok());
  std::this_thread::sleep_for(milliseconds(80));
  const Status late = token.Check("before tile call 3 (2 done)");
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(late.message(), HasSubstr("options.deadline_ms 50 passed"));
  EXPECT_THAT(late.message(), HasSubstr("before tile call 3 (2 done)"));
}

TEST_F(RequestHandlerTest, ExecutorReportedMemoryFaultsCountAgainstTheClient) {
  options_.quarantine.fault_threshold = 2;
  Rebuild();
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  const Status fault = ClientFault("reading latent: memory fault (SIGBUS)");
  handler_->OnJobDone(JobOf(c), fault, Clock::now());
  EXPECT_EQ(StatusNow().quarantined_size(), 0);
  handler_->OnJobDone(JobOf(c), fault, Clock::now());
  ASSERT_EQ(StatusNow().quarantined_size(), 1);
  EXPECT_THAT(StatusNow().quarantined(0).last_fault(), HasSubstr("memory: reading latent"));
  // A daemon-side failure is not the client's fault.
  const uint64_t other = Hello("b", Peer(200));
  const Status internal = Internal("LibTorch failed");
  handler_->OnJobDone(JobOf(other), internal, Clock::now());
  handler_->OnJobDone(JobOf(other), internal, Clock::now());
  EXPECT_EQ(StatusNow().quarantined_size(), 1);
}

TEST_F(RequestHandlerTest, UnhealthyDaemonRefusesDecodesAndSaysWhy) {
  const PeerCredentials p = Peer(100);
  const uint64_t c = Hello("a", p);
  Regions r = MakeRegions();
  auto in = Register("a", p, c, r.in->name(), kLatentBytes);
  auto out = Register("a", p, c, r.out->name(), kOutputBytes);
  handler_->set_health("sticky device error: illegal memory access");
  const Status s = ErrorOf(Send("a", p, Decode(c, *in, *out)));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("unhealthy"));
  EXPECT_FALSE(StatusNow().healthy());
  EXPECT_THAT(StatusNow().health(), HasSubstr("illegal memory access"));
  EXPECT_EQ(StatusNow().client_faults(), 0u);
}

}  // namespace
}  // namespace vaed::server
