// libFuzzer target for the daemon's control protocol: message decoding and
// request validation in vaed::server::RequestHandler (request_handler.h),
// without sockets, plus ParsePeerAddress (peer.h) and FromProto(TensorRef)
// (vaed/wire.h) directly.
//
// One fuzz input is a short session: up to kMaxSteps steps, each one
// message on one of kSlots simulated ZeroMQ connections (raw bytes, or a
// request built from fuzzed fields so Hello and region registration are
// cheap to reach), or a daemon-side event (Tick, FillStatus, the executor
// answering a job, a reconnect, a health change, a refusing executor).
// The byte stream is read with FuzzedDataProvider through the Source
// interface below, which the seed writer (--write-seeds DIR) implements too,
// so seeds are produced by the very code that reads them.
//
// State: the model registry (the built-in demo model) and two small shm
// segments are created once; the handler, its fake executor and the clock
// are created per input, so every input replays the same way.
//
// Invariants checked after every step (abort() on violation, so libFuzzer
// records the input): see Send(), CheckJob() and CheckInvariants().
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/Parallel.h>
#include <fuzzer/FuzzedDataProvider.h>
#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/engine/executor.h"
#include "daemon/models/model_registry.h"
#include "daemon/server/access_control.h"
#include "daemon/server/client_registry.h"
#include "daemon/server/config.h"
#include "daemon/server/peer.h"
#include "daemon/server/request_handler.h"
#include "vaed/status.h"
#include "vaed/tensor_ref.h"
#include "vaed/v1/vaed.pb.h"
#include "vaed/wire.h"

namespace {

using Clock = std::chrono::steady_clock;
using vaed::DType;
using vaed::Status;
using vaed::TensorRef;
using vaed::server::ClientState;
using vaed::server::Incoming;
using vaed::server::PeerCredentials;
using vaed::server::RequestHandler;
namespace v1 = vaed::v1;
namespace engine = vaed::engine;

constexpr int kMaxSteps = 16;
constexpr int kSlots = 4;                        // simulated connections
constexpr uint64_t kSegmentBytes = 128 * 1024;   // each of the two real segments
constexpr size_t kSinkCapacity = 6;              // fake executor queue (> max_in_flight 4)
constexpr int32_t kDeadPid = 0x7ffffff0;         // a pid PidAlive reports as exited

// ------------------------------------------------------------ failures

[[noreturn]] void Fail(const char* cond, int line, const std::string& detail) {
  std::fprintf(stderr, "\n==vaed-fuzz== INVARIANT VIOLATED at request_fuzzer.cc:%d: %s\n", line,
               cond);
  if (!detail.empty()) std::fprintf(stderr, "==vaed-fuzz== %s\n", detail.c_str());
  std::fflush(stderr);
  std::abort();
}

#define FUZZ_CHECK(cond, detail)                 \
  do {                                           \
    if (!(cond)) Fail(#cond, __LINE__, (detail)); \
  } while (0)

// ------------------------------------------------------------ input sources

// Reads the fuzz input. Field names are only for the seed writer.
class FdpSource {
 public:
  FdpSource(const uint8_t* data, size_t size) : fdp_(data, size) {}
  template <typename T>
  T Int(const char*, T min, T max) {
    return fdp_.ConsumeIntegralInRange<T>(min, max);
  }
  template <typename T>
  T Int(const char* field) {
    return Int<T>(field, std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  }
  bool Bool(const char*) { return fdp_.ConsumeBool(); }
  std::string Str(const char*, size_t max_len) { return fdp_.ConsumeRandomLengthString(max_len); }
  bool More() { return fdp_.remaining_bytes() > 0; }
  void BeginStep() {}

 private:
  FuzzedDataProvider fdp_;
};

// Writes an input that FdpSource reads back as the scripted values: each
// step is a list of (field, value); a field read more than once takes its
// values in order; a field without a value reads as its minimum (or "").
// Mirrors FuzzedDataProvider: integers come from the end of the data, most
// significant byte first; strings from the front, '\' escaped as "\\" and
// ended by '\' + another byte.
class SeedWriter {
 public:
  struct Value {
    bool is_str = false;
    uint64_t bits = 0;
    std::string str;
  };
  using Field = std::pair<std::string, Value>;
  using Step = std::vector<Field>;

  explicit SeedWriter(std::vector<Step> steps) : steps_(std::move(steps)) {}

  template <typename T>
  T Int(const char* field, T min, T max) {
    T v = min;
    if (std::optional<Value> x = Take(field)) {
      if (x->is_str) Die(std::string("field ") + field + " is an integer");
      v = static_cast<T>(x->bits);
      if (static_cast<uint64_t>(v) != x->bits || v < min || v > max) {
        Die(std::string("value of ") + field + " is out of its range");
      }
    }
    const uint64_t range = static_cast<uint64_t>(max) - static_cast<uint64_t>(min);
    const uint64_t r = static_cast<uint64_t>(v) - static_cast<uint64_t>(min);
    size_t n = 0;
    for (size_t offset = 0; offset < sizeof(T) * 8 && (range >> offset) > 0; offset += 8) ++n;
    for (size_t k = 0; k < n; ++k) back_.push_back(static_cast<uint8_t>(r >> (8 * (n - 1 - k))));
    return v;
  }
  template <typename T>
  T Int(const char* field) {
    return Int<T>(field, std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  }
  bool Bool(const char* field) { return (Int<uint8_t>(field, 0, 255) & 1) != 0; }
  std::string Str(const char* field, size_t max_len) {
    std::string s;
    if (std::optional<Value> x = Take(field)) {
      if (!x->is_str) Die(std::string("field ") + field + " is a string");
      s = x->str;
    }
    if (s.size() > max_len) Die(std::string("value of ") + field + " is too long");
    for (char ch : s) {
      front_.push_back(static_cast<uint8_t>(ch));
      if (ch == '\\') front_.push_back('\\');
    }
    if (s.size() < max_len) {
      front_.push_back('\\');
      front_.push_back('\n');
    }
    return s;
  }
  bool More() const { return next_ < steps_.size(); }
  void BeginStep() {
    if (next_ >= steps_.size()) Die("more steps read than scripted");
    cur_ = next_++;
  }

  // The input; dies if a scripted value was not read (the script and the
  // reader disagree).
  std::string Finish() const {
    for (size_t i = 0; i < steps_.size(); ++i) {
      if (!steps_[i].empty()) Die("step " + std::to_string(i) + ": field " +
                                  steps_[i].front().first + " was never read");
    }
    std::string out(front_.begin(), front_.end());
    out.append(back_.rbegin(), back_.rend());
    return out;
  }

 private:
  [[noreturn]] static void Die(const std::string& why) {
    std::fprintf(stderr, "vaed-fuzz --write-seeds: %s\n", why.c_str());
    std::exit(2);
  }
  std::optional<Value> Take(const char* field) {
    Step& s = steps_[cur_];
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it->first == field) {
        Value v = std::move(it->second);
        s.erase(it);
        return v;
      }
    }
    return std::nullopt;
  }

  std::vector<Step> steps_;
  size_t cur_ = 0, next_ = 0;
  std::vector<uint8_t> front_, back_;
};

// ------------------------------------------------------------ global state

struct Global {
  vaed::server::DaemonOptions options;
  std::unique_ptr<vaed::models::ModelRegistry> registry;
  std::optional<vaed::server::AccessPolicy> access;
  std::string segment[2];  // real shm segments, names with the "vaed-" prefix
  uint32_t uid = 0, gid = 0;
  int32_t pid = 0;
  std::string oversize_payload;  // max_message_bytes + 1 bytes
};
Global* g = nullptr;

void UnlinkSegments() {
  if (g == nullptr) return;
  for (const std::string& s : g->segment) {
    if (!s.empty()) shm_unlink(("/" + s).c_str());
  }
}

// Segments of fuzzers that crashed or were killed: "vaed-fuzz-<pid>-*" of a
// pid that no longer exists.
void RemoveStaleSegments() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    int pid = 0;
    char tail = 0;
    if (std::sscanf(e->d_name, "vaed-fuzz-%d-%c", &pid, &tail) == 2 && pid > 0 &&
        kill(pid, 0) != 0 && errno == ESRCH) {
      shm_unlink((std::string("/") + e->d_name).c_str());
    }
  }
  closedir(dir);
}

std::string CreateSegment(char tag) {
  const std::string name = "vaed-fuzz-" + std::to_string(getpid()) + "-" + tag;
  const int fd = shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(kSegmentBytes)) != 0) {
    std::fprintf(stderr, "vaed-fuzz: cannot create shm segment %s: %s\n", name.c_str(),
                 std::strerror(errno));
    std::exit(1);
  }
  close(fd);
  return name;
}

void InitGlobal() {
  g = new Global;  // never freed: reachable until exit
  spdlog::set_level(spdlog::level::off);
  // Quiet: proto3 strings that are not UTF-8 fail to parse (as they should)
  // and protobuf logs every one at ERROR level.
  google::protobuf::SetLogHandler(nullptr);
  at::set_num_threads(1);
  g->uid = static_cast<uint32_t>(geteuid());
  g->gid = static_cast<uint32_t>(getegid());
  g->pid = static_cast<int32_t>(getpid());

  g->options.quarantine.fault_threshold = 5;
  g->options.executor.allow_fault_injection = false;

  vaed::models::ModelConfig demo;
  demo.name = "demo";
  demo.kind = vaed::models::ModelKind::kDemo;
  auto registry = vaed::models::ModelRegistry::Create({demo}, "demo");
  if (!registry.ok()) {
    std::fprintf(stderr, "vaed-fuzz: demo model: %s\n", registry.status().ToString().c_str());
    std::exit(1);
  }
  g->registry = std::move(*registry);
  auto access = vaed::server::AccessPolicy::Create({}, {}, {});
  if (!access.ok()) {
    std::fprintf(stderr, "vaed-fuzz: access policy: %s\n", access.status().ToString().c_str());
    std::exit(1);
  }
  g->access = std::move(*access);

  RemoveStaleSegments();
  g->segment[0] = CreateSegment('a');
  g->segment[1] = CreateSegment('b');
  std::atexit(UnlinkSegments);
  g->oversize_payload.assign(g->options.server.max_message_bytes + 1, '\x0a');
}

// ------------------------------------------------------------ fake executor

class FakeSink final : public vaed::server::JobSink {
 public:
  struct Pending {
    std::unique_ptr<engine::DecodeJob> job;
    std::optional<Status> cancelled;
  };

  Status Submit(std::unique_ptr<engine::DecodeJob> job) override {
    FUZZ_CHECK(job != nullptr, "");
    if (refuse_next_) {
      Status s = *refuse_next_;
      refuse_next_.reset();
      return s;
    }
    if (pending_.size() >= kSinkCapacity) return vaed::Busy("fuzz executor queue is full", 20);
    ++submitted_;
    last_ = job.get();
    pending_.push_back({std::move(job), std::nullopt});
    return Status::Ok();
  }

  size_t CancelClient(uint64_t client_id, const Status& why) override {
    size_t n = 0;
    for (Pending& p : pending_) {
      if (p.job->client_id == client_id && !p.cancelled) {
        p.cancelled = why;
        ++n;
      }
    }
    return n;
  }

  size_t queue_depth() const override { return pending_.size(); }

  uint32_t PendingFor(uint64_t client_id) const {
    uint32_t n = 0;
    for (const Pending& p : pending_) n += p.job->client_id == client_id ? 1 : 0;
    return n;
  }

  // Pending jobs of `client_id` naming region `region_id` (each job once).
  uint32_t PendingNaming(uint64_t client_id, uint64_t region_id) const {
    uint32_t n = 0;
    for (const Pending& p : pending_) {
      const engine::DecodeJob& j = *p.job;
      if (j.client_id != client_id) continue;
      const bool names =
          (j.video && (j.video->latent.region_id == region_id ||
                       j.video->output.region_id == region_id)) ||
          (j.audio && (j.audio->latent.region_id == region_id ||
                       j.audio->output.region_id == region_id));
      n += names ? 1 : 0;
    }
    return n;
  }

  uint64_t submitted() const { return submitted_; }
  const engine::DecodeJob* last() const { return last_; }
  std::deque<Pending>& pending() { return pending_; }
  void RefuseNext(Status s) { refuse_next_ = std::move(s); }

 private:
  std::deque<Pending> pending_;
  uint64_t submitted_ = 0;
  const engine::DecodeJob* last_ = nullptr;
  std::optional<Status> refuse_next_;
};

// ------------------------------------------------------------ one session

enum Action : uint8_t {
  kHello,
  kRegister,
  kDecode,
  kStatus,
  kHeartbeat,
  kGoodbye,
  kUnregister,
  kRelease,
  kRaw,
  kTick,
  kFillStatus,
  kCompleteJob,
  kReconnect,
  kSetHealth,
  kRefuseNext,
  kDecode2,  // a second Decode entry: decodes are what matters most
  kNumActions,
};

const char* ActionName(uint8_t a) {
  static const char* const kNames[] = {"hello",  "register", "decode",  "status",
                                       "heartbeat", "goodbye", "unregister", "release",
                                       "raw",    "tick",     "fill_status", "complete_job",
                                       "reconnect", "set_health", "refuse_next", "decode"};
  return a < kNumActions ? kNames[a] : "?";
}

const char* BodyName(const v1::Reply& r) {
  switch (r.body_case()) {
    case v1::Reply::kError: return "error";
    case v1::Reply::kHello: return "hello";
    case v1::Reply::kRegisterRegion: return "register_region";
    case v1::Reply::kUnregisterRegion: return "unregister_region";
    case v1::Reply::kDecode: return "decode";
    case v1::Reply::kStatus: return "status";
    case v1::Reply::kHeartbeat: return "heartbeat";
    case v1::Reply::kGoodbye: return "goodbye";
    case v1::Reply::kReleaseQuarantine: return "release_quarantine";
    default: return "none";
  }
}

struct Conn {
  bool open = false;
  int generation = 0;
  std::string routing_id;
  std::optional<PeerCredentials> peer;  // fixed per connection, as SO_PEERCRED is
  std::vector<uint64_t> clients;        // ids from HelloReplies on this connection
  std::vector<uint64_t> regions;        // ids from RegisterRegionReplies
};

class Session {
 public:
  explicit Session(std::vector<std::string>* trace)
      : handler_(g->options, g->registry.get(), &sink_, &*g->access,
                 [](int32_t pid) { return pid != kDeadPid; }),
        now_(Clock::now()),
        trace_(trace) {}

  ~Session() {
    // The executor answers whatever is still queued; then everything goes.
    while (!sink_.pending().empty()) Complete(0, 0);
    CheckInvariants();
  }

  template <typename Src>
  void Run(Src& in) {
    in.BeginStep();
    FuzzParsers(in);
    for (int step = 0; step < kMaxSteps && in.More(); ++step) {
      in.BeginStep();
      Step(in);
      CheckInvariants();
    }
  }

 private:
  // ---- direct parsers
  template <typename Src>
  void FuzzParsers(Src& in) {
    const uint8_t which = in.template Int<uint8_t>("direct", 0, 3);
    if (which & 1) {
      const std::string address = in.Str("direct.peer", 64);
      if (std::optional<PeerCredentials> p = vaed::server::ParsePeerAddress(address)) {
        FUZZ_CHECK(p->pid >= 0, address);
        // The same fields behind another address parse the same.
        const std::string again = "ipc://x:" + std::to_string(p->uid) + ":" +
                                  std::to_string(p->gid) + ":" + std::to_string(p->pid);
        std::optional<PeerCredentials> q = vaed::server::ParsePeerAddress(again);
        FUZZ_CHECK(q && q->uid == p->uid && q->gid == p->gid && q->pid == p->pid, again);
      }
    }
    if (which & 2) {
      const std::string bytes = in.Str("direct.tensor_ref", 256);
      v1::TensorRef t;
      if (t.ParseFromString(bytes)) {
        vaed::Result<TensorRef> r = vaed::FromProto(t, "fuzz");
        if (r.ok()) {
          FUZZ_CHECK(r->dtype != DType::kUnknown && !r->shape.empty(), t.ShortDebugString());
          vaed::Result<uint64_t> bytes_needed = vaed::ContiguousBytes(r->dtype, r->shape, "x");
          FUZZ_CHECK(bytes_needed.ok() && *bytes_needed == r->size, t.ShortDebugString());
          v1::TensorRef back;
          vaed::ToProto(*r, &back);
          FUZZ_CHECK(back.region_id() == t.region_id() && back.offset_bytes() == t.offset_bytes() &&
                         back.size_bytes() == t.size_bytes() && back.dtype() == t.dtype() &&
                         back.shape_size() == t.shape_size(),
                     t.ShortDebugString());
        } else {
          FUZZ_CHECK(!r.status().message().empty(), t.ShortDebugString());
        }
      }
    }
  }

  // ---- one step
  template <typename Src>
  void Step(Src& in) {
    const uint8_t action = in.template Int<uint8_t>("action", 0, kNumActions - 1);
    Advance(in.template Int<uint8_t>("dt", 0, 255));
    switch (action) {
      case kTick:
        handler_.Tick(now_);
        Trace(action, "-");
        return;
      case kFillStatus: {
        v1::StatusReply s;
        handler_.FillStatus(&s, now_);
        FUZZ_CHECK(s.clients() == handler_.clients().client_count(), s.ShortDebugString());
        FUZZ_CHECK(s.regions() == handler_.clients().region_count(), s.ShortDebugString());
        FUZZ_CHECK(s.queue_depth() == sink_.queue_depth(), s.ShortDebugString());
        Trace(action, "-");
        return;
      }
      case kCompleteJob: {
        const uint8_t index = in.template Int<uint8_t>("job", 0, 255);
        const uint8_t outcome = in.template Int<uint8_t>("job.outcome", 0, 7);
        if (!sink_.pending().empty()) Complete(index % sink_.pending().size(), outcome);
        Trace(action, "-");
        return;
      }
      case kReconnect: {
        Conn& c = conns_[in.template Int<uint8_t>("conn", 0, kSlots - 1)];
        c.open = false;  // the next message opens a new connection (new routing id)
        Trace(action, "-");
        return;
      }
      case kSetHealth:
        handler_.set_health(in.Bool("health") ? "executor failed: fuzz" : "");
        Trace(action, "-");
        return;
      case kRefuseNext:
        switch (in.template Int<uint8_t>("refuse", 0, 2)) {
          case 0: sink_.RefuseNext(vaed::Busy("fuzz: queue full", 10)); break;
          case 1: sink_.RefuseNext(vaed::Unavailable("fuzz: executor failed")); break;
          default: sink_.RefuseNext(vaed::Cancelled("fuzz: shutting down")); break;
        }
        Trace(action, "-");
        return;
      default:
        break;
    }

    // A message on one connection.
    const int slot = in.template Int<uint8_t>("conn", 0, kSlots - 1);
    Conn& c = Open(in, slot);
    // Now and then a message the framing reported as over the cap (its
    // declared length; the payload was skipped unread).
    const uint8_t oversized_sel = in.template Int<uint8_t>("frames", 0, 15);
    const uint64_t oversized =
        oversized_sel <= 13 ? 0
                            : g->options.server.max_message_bytes + 1 +
                                  (oversized_sel == 15 ? uint64_t{UINT32_MAX} - 1 -
                                                             g->options.server.max_message_bytes
                                                       : 0);

    std::string payload;
    if (action == kRaw) {
      if (in.template Int<uint8_t>("raw.kind", 0, 15) == 15) {
        payload = g->oversize_payload;
      } else {
        payload = in.Str("raw.payload", 2048);
      }
    } else {
      v1::Request req;
      req.set_request_id(in.template Int<uint16_t>("request_id"));
      req.set_client_id(ClientIdFor(in, slot));
      switch (action) {
        case kHello: BuildHello(in, c, req.mutable_hello()); break;
        case kRegister: BuildRegister(in, req.mutable_register_region()); break;
        case kDecode:
        case kDecode2: BuildDecode(in, slot, req.mutable_decode()); break;
        case kStatus: req.mutable_status(); break;
        case kHeartbeat: req.mutable_heartbeat(); break;
        case kGoodbye: req.mutable_goodbye(); break;
        case kUnregister:
          req.mutable_unregister_region()->set_region_id(RegionIdFor(in, slot));
          break;
        case kRelease: BuildRelease(in, c, req.mutable_release_quarantine()); break;
        default: break;
      }
      payload = req.SerializeAsString();
      // Sometimes break the serialization.
      switch (in.template Int<uint8_t>("mutate", 0, 15)) {
        case 14:
          payload.resize(in.template Int<uint16_t>("mutate.keep") % (payload.size() + 1));
          break;
        case 15:
          payload += in.Str("mutate.tail", 16);
          break;
        default:
          break;
      }
    }
    Send(action, slot, oversized, payload);
  }

  void Advance(uint8_t dt) {
    const int64_t ms = dt < 200 ? dt : int64_t{dt - 199} * 1000;
    now_ += std::chrono::milliseconds(ms);
  }

  template <typename Src>
  Conn& Open(Src& in, int slot) {
    Conn& c = conns_[slot];
    if (c.open) return c;
    c.open = true;
    c.routing_id = "conn-" + std::to_string(slot) + "." + std::to_string(c.generation++);
    c.clients.clear();
    c.regions.clear();
    const uint8_t p = in.template Int<uint8_t>("peer", 0, 15);
    if (p <= 8) {
      c.peer = PeerCredentials{g->uid, g->gid, g->pid};
    } else if (p == 9) {
      c.peer = std::nullopt;  // a transport without SO_PEERCRED
    } else if (p == 10) {
      c.peer = PeerCredentials{g->uid, g->gid, g->pid + 1};  // same user, another process
    } else if (p == 11) {
      c.peer = PeerCredentials{1000, 1000, 4242};  // another user
    } else if (p == 12) {
      c.peer = PeerCredentials{g->uid, g->gid, kDeadPid};  // a process that has exited
    } else if (p == 13) {
      c.peer = PeerCredentials{0, 0, 1};  // root
    } else if (p == 14) {
      c.peer = PeerCredentials{65534, 65534, 77};
    } else {
      c.peer = PeerCredentials{in.template Int<uint32_t>("peer.uid"),
                               in.template Int<uint32_t>("peer.gid"),
                               in.template Int<int32_t>("peer.pid")};
    }
    return c;
  }

  template <typename Src>
  uint64_t ClientIdFor(Src& in, int slot) {
    const uint8_t sel = in.template Int<uint8_t>("client", 0, 7);
    if (sel <= 4) return conns_[slot].clients.empty() ? 0 : conns_[slot].clients.back();
    if (sel == 5) {  // another connection's client
      const Conn& other = conns_[(slot + 1) % kSlots];
      return other.clients.empty() ? 1 : other.clients.back();
    }
    if (sel == 6) return 0;
    return in.template Int<uint64_t>("client.id");
  }

  template <typename Src>
  uint64_t RegionIdFor(Src& in, int slot) {
    const uint8_t sel = in.template Int<uint8_t>("ref.region", 0, 7);
    const std::vector<uint64_t>& mine = conns_[slot].regions;
    if (sel <= 5) return mine.empty() ? 1 : mine[sel % mine.size()];
    if (sel == 6) {  // a region of another connection (ids are daemon-wide)
      const std::vector<uint64_t>& other = conns_[(slot + 1) % kSlots].regions;
      return other.empty() ? 2 : other.back();
    }
    return in.template Int<uint64_t>("ref.region_id");
  }

  template <typename Src>
  void BuildHello(Src& in, const Conn& c, v1::Hello* h) {
    const uint8_t v = in.template Int<uint8_t>("hello.version", 0, 7);
    h->set_protocol_version(v <= 5 ? vaed::kProtocolVersion
                                   : v == 6 ? 0 : in.template Int<uint32_t>("hello.version_raw"));
    h->set_client_name(in.Str("hello.name", 24));
    const uint8_t p = in.template Int<uint8_t>("hello.pid", 0, 3);
    h->set_pid(p <= 1 ? (c.peer ? c.peer->pid : g->pid)
                      : p == 2 ? 0 : in.template Int<int32_t>("hello.pid_raw"));
  }

  template <typename Src>
  void BuildRegister(Src& in, v1::RegisterRegion* r) {
    const uint8_t kind = in.template Int<uint8_t>("reg.kind", 0, 7);
    if (kind == 7) return;  // neither host nor cuda
    if (kind == 6) {
      r->mutable_cuda()->set_ipc_handle(in.Str("reg.cuda_handle", 64));
      r->mutable_cuda()->set_size_bytes(in.template Int<uint32_t>("reg.size_raw"));
      return;
    }
    v1::HostShmRegion* h = r->mutable_host();
    const uint8_t n = in.template Int<uint8_t>("reg.name", 0, 7);
    if (n <= 3) {
      h->set_name(g->segment[0]);
    } else if (n <= 5) {
      h->set_name(g->segment[1]);
    } else if (n == 6) {
      h->set_name(in.Str("reg.name_raw", 64));
    } else {
      h->set_name("vaed-" + in.Str("reg.name_raw", 64));
    }
    const uint8_t s = in.template Int<uint8_t>("reg.size", 0, 7);
    h->set_size_bytes(s <= 4   ? kSegmentBytes
                      : s == 5 ? in.template Int<uint16_t>("reg.size_small")
                      : s == 6 ? kSegmentBytes + 1
                               : in.template Int<uint64_t>("reg.size_raw64"));
  }

  // A TensorRef for `dtype` / `shape` (already set in `t`): region, offset
  // and byte size mostly right, sometimes not.
  template <typename Src>
  void FillRef(Src& in, int slot, v1::TensorRef* t) {
    std::vector<int64_t> shape(t->shape().begin(), t->shape().end());
    vaed::Result<uint64_t> want = vaed::ContiguousBytes(vaed::FromProto(t->dtype()), shape, "x");
    const uint64_t bytes = want.ok() ? *want : 0;
    t->set_region_id(RegionIdFor(in, slot));
    const uint8_t o = in.template Int<uint8_t>("ref.offset", 0, 255);
    uint64_t offset = 0;
    if (o < 128) {
      offset = uint64_t{o} * 1024;
    } else if (o < 250) {
      offset = uint64_t{o - 128u} * 4;  // small, 4-byte aligned
    } else if (o == 250) {
      offset = kSegmentBytes - std::min(bytes, kSegmentBytes);  // flush with the end
    } else if (o == 251) {
      offset = kSegmentBytes - std::min(bytes, kSegmentBytes) + 1;  // one past
    } else if (o == 252) {
      offset = std::numeric_limits<uint64_t>::max() - 7;
    } else if (o == 253) {
      offset = kSegmentBytes;
    } else {
      offset = in.template Int<uint64_t>("ref.offset_raw");
    }
    t->set_offset_bytes(offset);
    const uint8_t s = in.template Int<uint8_t>("ref.size", 0, 15);
    if (s <= 13) {
      t->set_size_bytes(bytes);
    } else if (s == 14) {
      t->set_size_bytes(bytes + static_cast<uint64_t>(in.template Int<int8_t>("ref.size_delta")));
    } else {
      t->set_size_bytes(in.template Int<uint64_t>("ref.size_raw"));
    }
  }

  template <typename Src>
  void BuildDecode(Src& in, int slot, v1::Decode* d) {
    const uint8_t m = in.template Int<uint8_t>("decode.model", 0, 7);
    if (m >= 4 && m <= 5) d->set_model("demo");
    if (m == 6) d->set_model("taef2");
    if (m == 7) d->set_model(in.Str("decode.model_name", 40));
    d->set_plan_only(in.Bool("decode.plan_only"));
    const uint8_t f = in.template Int<uint8_t>("decode.format", 0, 7);
    static constexpr v1::OutputFormat kFormats[] = {
        v1::OUTPUT_FORMAT_UNSPECIFIED,   v1::OUTPUT_FORMAT_UINT8_NHWC,
        v1::OUTPUT_FORMAT_UINT8_NHWC,    v1::OUTPUT_FORMAT_FLOAT32_NCHW,
        v1::OUTPUT_FORMAT_FLOAT32_NCHW_UNIT, v1::OUTPUT_FORMAT_UNSPECIFIED,
        v1::OUTPUT_FORMAT_FLOAT32_NCHW};
    d->set_output_format(f < 7 ? kFormats[f]
                               : static_cast<v1::OutputFormat>(
                                     in.template Int<int32_t>("decode.format_raw")));

    // The video latent.
    if (in.template Int<uint8_t>("decode.latent", 0, 15) != 15) {
      v1::TensorRef* t = d->mutable_latent();
      const uint8_t dt = in.template Int<uint8_t>("latent.dtype", 0, 7);
      t->set_dtype(dt <= 5   ? v1::DTYPE_FLOAT32
                   : dt == 6 ? v1::DTYPE_BFLOAT16
                             : static_cast<v1::DType>(in.template Int<int32_t>("latent.dtype_raw")));
      const uint8_t mode = in.template Int<uint8_t>("latent.shape", 0, 15);
      if (mode <= 13) {
        t->add_shape(in.template Int<uint8_t>("latent.n", 1, 4));
        t->add_shape(mode == 13 ? in.template Int<uint8_t>("latent.c") : 32);
        t->add_shape(in.template Int<uint8_t>("latent.h", 1, 4));
        t->add_shape(in.template Int<uint8_t>("latent.w", 1, 4));
      } else if (mode == 14) {
        const int rank = in.template Int<uint8_t>("latent.rank", 0, 6);
        for (int i = 0; i < rank; ++i) t->add_shape(in.template Int<int64_t>("latent.dim"));
      } else {
        // Valid for the model but far larger than the segment.
        t->add_shape(in.template Int<uint16_t>("latent.n_big", 1, 4096));
        t->add_shape(32);
        t->add_shape(in.template Int<uint16_t>("latent.h_big", 1, 300));
        t->add_shape(in.template Int<uint16_t>("latent.w_big", 1, 300));
      }
      FillRef(in, slot, t);
    }

    // The output: the layout the plan asks for, mostly.
    if (in.template Int<uint8_t>("decode.output", 0, 15) != 15) {
      v1::TensorRef* t = d->mutable_output();
      int64_t frames = 1, height = 8, width = 8;
      if (d->has_latent() && d->latent().shape_size() == 4) {
        std::vector<int64_t> shape(d->latent().shape().begin(), d->latent().shape().end());
        vaed::Result<vaed::models::DecodePlan> plan = g->registry->Find("")->Plan(DType::kFloat32, shape);
        if (plan.ok()) {
          frames = plan->frames;
          height = plan->height_px;
          width = plan->width_px;
        }
      }
      const bool f32 = d->output_format() == v1::OUTPUT_FORMAT_FLOAT32_NCHW ||
                       d->output_format() == v1::OUTPUT_FORMAT_FLOAT32_NCHW_UNIT;
      const uint8_t mode = in.template Int<uint8_t>("output.shape", 0, 15);
      const bool as_f32 = mode == 13 ? !f32 : f32;  // 13: the other layout
      t->set_dtype(as_f32 ? v1::DTYPE_FLOAT32 : v1::DTYPE_UINT8);
      if (mode == 15) {
        const int rank = in.template Int<uint8_t>("output.rank", 0, 6);
        for (int i = 0; i < rank; ++i) t->add_shape(in.template Int<int64_t>("output.dim"));
      } else if (as_f32 != (mode == 14)) {  // NCHW (14: the wrong order)
        for (int64_t x : {frames, int64_t{3}, height, width}) t->add_shape(x);
      } else {  // NHWC
        for (int64_t x : {frames, height, width, int64_t{3}}) t->add_shape(x);
      }
      FillRef(in, slot, t);
    }

    // Audio (the demo model has none: always an error, but the parsing
    // before it runs).
    const uint8_t a = in.template Int<uint8_t>("decode.audio", 0, 15);
    if (a == 14) {
      v1::TensorRef* t = d->mutable_audio_latent();
      t->set_dtype(v1::DTYPE_FLOAT32);
      for (int64_t x : {int64_t{1}, int64_t{32}, int64_t{in.template Int<uint8_t>("audio.t", 1, 80)}}) {
        t->add_shape(x);
      }
      FillRef(in, slot, t);
    }
    if (a >= 14) {
      v1::TensorRef* t = d->mutable_audio_output();
      t->set_dtype(v1::DTYPE_FLOAT32);
      t->add_shape(1);
      t->add_shape(800 * int64_t{in.template Int<uint8_t>("audio.t", 1, 80)});
      FillRef(in, slot, t);
    }

    // Options.
    v1::DecodeOptions* o = d->mutable_options();
    const uint8_t p = in.template Int<uint8_t>("opt.profile", 0, 7);
    static const char* const kProfiles[] = {"", "", "", "", "safe", "optimized", "diagnostic"};
    o->set_profile(p < 7 ? std::string(kProfiles[p]) : in.Str("opt.profile_name", 16));
    const uint8_t st = in.template Int<uint8_t>("opt.stack", 0, 7);
    o->set_stack_tiling(static_cast<v1::StackTiling>(
        st <= 3 ? 0 : st <= 6 ? st - 3 : in.template Int<int32_t>("opt.stack_raw")));
    const uint8_t co = in.template Int<uint8_t>("opt.compile", 0, 7);
    o->set_compile(static_cast<v1::Compile>(
        co <= 3 ? 0 : co <= 6 ? co - 3 : in.template Int<int32_t>("opt.compile_raw")));
    if (in.template Int<uint8_t>("opt.tiling", 0, 7) == 7) {
      o->mutable_tiling()->set_tile_latent(in.template Int<uint16_t>("opt.tile"));
      o->mutable_tiling()->set_overlap_latent(in.template Int<uint16_t>("opt.overlap"));
    }
    if (in.template Int<uint8_t>("opt.inject", 0, 15) == 15) {
      o->add_inject_faults(in.Str("opt.fault", 20));
    }
    if (in.template Int<uint8_t>("opt.deadline", 0, 7) == 7) {
      o->set_deadline_ms(in.template Int<uint32_t>("opt.deadline_ms"));
    }
    const uint8_t fps = in.template Int<uint8_t>("av.fps", 0, 7);
    if (fps == 5) d->mutable_av_sync()->set_fps(24.0);
    if (fps == 6) d->mutable_av_sync()->set_fps(30000.5);
    if (fps == 7) {
      d->mutable_av_sync()->set_fps(std::bit_cast<double>(in.template Int<uint64_t>("av.fps_bits")));
    }
    if (in.template Int<uint8_t>("av.independent", 0, 7) == 7) {
      d->mutable_av_sync()->set_independent_lengths(true);
    }
  }

  template <typename Src>
  void BuildRelease(Src& in, const Conn& c, v1::ReleaseQuarantine* r) {
    const uint8_t sel = in.template Int<uint8_t>("rel.client", 0, 7);
    std::string what;
    switch (sel) {
      case 0: what = "all"; break;
      case 1: what = "pid:" + std::to_string(c.peer ? c.peer->pid : g->pid); break;
      case 2: what = "uid:" + std::to_string(c.peer ? c.peer->uid : g->uid); break;
      case 3: what = std::to_string(c.clients.empty() ? 1 : c.clients.back()); break;
      case 4: what = "pid:" + std::to_string(in.template Int<uint32_t>("rel.pid")); break;
      default: what = in.Str("rel.client_raw", 32); break;
    }
    r->set_client(what);
  }

  // ---- sending one message and checking the handler's answer
  void Send(uint8_t action, int slot, uint64_t oversized, const std::string& payload) {
    Conn& c = conns_[slot];
    Incoming in;
    in.routing_id = c.routing_id;
    in.peer = c.peer;
    in.payload = oversized == 0 ? std::string_view(payload) : std::string_view();
    in.oversized_bytes = oversized;

    // What the handler should see: the request, when it is one.
    v1::Request req;
    const bool parsed = oversized == 0 && payload.size() <= g->options.server.max_message_bytes &&
                        req.ParseFromArray(payload.data(), static_cast<int>(payload.size()));

    const uint64_t submitted_before = sink_.submitted();
    std::optional<v1::Reply> reply = handler_.Handle(in, now_);
    const uint64_t submitted = sink_.submitted() - submitted_before;
    const std::string what = std::string(ActionName(action)) + " on " + c.routing_id +
                             (parsed ? ": " + req.ShortDebugString().substr(0, 600) : "");

    if (reply) {
      // Exactly one reply, and no job.
      FUZZ_CHECK(submitted == 0, what);
      FUZZ_CHECK(reply->body_case() != v1::Reply::BODY_NOT_SET, what);
      if (parsed) {
        FUZZ_CHECK(reply->request_id() == req.request_id(),
                   what + " -> " + reply->ShortDebugString().substr(0, 600));
      }
      if (reply->has_error()) {
        FUZZ_CHECK(reply->error().code() != v1::ERROR_CODE_OK, what);
        FUZZ_CHECK(!reply->error().message().empty(), what);
      }
      if (reply->has_decode()) {
        // Without a job a decode reply can only be a plan.
        FUZZ_CHECK(parsed && req.has_decode() && req.decode().plan_only() &&
                       reply->decode().planned_only(),
                   what);
      }
      if (reply->has_hello()) {
        FUZZ_CHECK(parsed && req.has_hello(), what);
        FUZZ_CHECK(handler_.clients().client_count() > 0, what);
        if (c.clients.size() < 8) c.clients.push_back(reply->hello().client_id());
      }
      if (reply->has_register_region()) {
        FUZZ_CHECK(parsed && req.has_register_region() && req.register_region().has_host(), what);
        FUZZ_CHECK(reply->register_region().mapped_bytes() == req.register_region().host().size_bytes(),
                   what);
        if (c.regions.size() < 8) c.regions.push_back(reply->register_region().region_id());
      }
      if (reply->has_unregister_region()) {
        // Answered at once only when the region is gone (it was idle).
        FUZZ_CHECK(parsed && req.has_unregister_region(), what);
        const ClientState* owner = FindClient(req.client_id());
        FUZZ_CHECK(owner != nullptr &&
                       owner->regions.count(req.unregister_region().region_id()) == 0,
                   what);
      }
      if (trace_ != nullptr && reply->has_error()) {
        std::string code = v1::ErrorCode_Name(reply->error().code());
        if (code.rfind("ERROR_CODE_", 0) == 0) code = code.substr(11);
        for (char& ch : code) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        Trace(action, ("error(" + code + ")").c_str());
        if (std::getenv("VAED_FUZZ_TRACE_ERRORS") != nullptr) {
          std::fprintf(stderr, "  %s -> %s\n", what.c_str(), reply->error().message().c_str());
        }
      } else {
        Trace(action, BodyName(*reply));
      }
    } else if (parsed && req.has_unregister_region()) {
      // Deferred (client_registry.h: region lifetime): no job, and the
      // sender's region is now awaiting unregister under this request's
      // id, with decodes still using it; the last one's end answers it.
      FUZZ_CHECK(submitted == 0, what);
      const ClientState* c = FindClient(req.client_id());
      FUZZ_CHECK(c != nullptr && c->routing_id == in.routing_id, what);
      auto it = c->regions.find(req.unregister_region().region_id());
      FUZZ_CHECK(it != c->regions.end() && it->second.decodes > 0 &&
                     it->second.unregister_request_id == req.request_id(),
                 what);
      deferred_.push_back({c->id, req.request_id()});
      Trace(action, "deferred");
    } else {
      // Exactly one job, and it is what was asked for.
      FUZZ_CHECK(submitted == 1, what + " (no reply and " + std::to_string(submitted) + " jobs)");
      FUZZ_CHECK(parsed && req.has_decode() && !req.decode().plan_only(), what);
      CheckJob(*sink_.last(), in, req, what);
      Trace(action, "job");
    }
  }

  const ClientState* FindClient(uint64_t id) const {
    for (const ClientState* c : handler_.clients().All()) {
      if (c->id == id) return c;
    }
    return nullptr;
  }

  void CheckJob(const engine::DecodeJob& j, const Incoming& in, const v1::Request& req,
                const std::string& what) {
    FUZZ_CHECK(j.request_id == req.request_id(), what);
    FUZZ_CHECK(j.routing_id == in.routing_id, what);
    FUZZ_CHECK(j.client_id == req.client_id(), what);
    const ClientState* c = FindClient(j.client_id);
    FUZZ_CHECK(c != nullptr && c->routing_id == in.routing_id, what);
    FUZZ_CHECK(j.model != nullptr && j.cancel != nullptr, what);
    FUZZ_CHECK(j.video || j.audio, what);

    struct Placed {
      const char* field;
      const TensorRef* ref;
      const vaed::HostRegion* region;
      bool written;
    };
    std::vector<Placed> placed;
    auto check_ref = [&](const char* field, const TensorRef& ref,
                         const std::shared_ptr<vaed::HostRegion>& region, bool written) {
      const std::string where = what + " [" + field + "]";
      FUZZ_CHECK(region != nullptr, where);
      // The region is this client's, under that id.
      auto it = c->regions.find(ref.region_id);
      FUZZ_CHECK(it != c->regions.end() && it->second.mapping == region, where);
      // New decodes never name a region awaiting unregister.
      FUZZ_CHECK(!it->second.awaiting_unregister(), where);
      vaed::Result<uint64_t> bytes = vaed::ContiguousBytes(ref.dtype, ref.shape, field);
      FUZZ_CHECK(bytes.ok() && *bytes == ref.size, where);
      // Inside the mapping, overflow-safe.
      FUZZ_CHECK(ref.offset <= region->size() && ref.size <= region->size() - ref.offset, where);
      // And really mapped: touch the first and last byte.
      if (ref.size > 0) {
        volatile uint8_t first = region->data()[ref.offset];
        volatile uint8_t last = region->data()[ref.offset + ref.size - 1];
        (void)first;
        (void)last;
      }
      placed.push_back({field, &ref, region.get(), written});
    };
    if (j.video) {
      const engine::VideoPart& v = *j.video;
      check_ref("latent", v.latent, v.latent_region, false);
      check_ref("output", v.output, v.output_region, true);
      vaed::Result<vaed::models::DecodePlan> plan = j.model->Plan(v.latent.dtype, v.latent.shape);
      FUZZ_CHECK(plan.ok(), what);
      FUZZ_CHECK(plan->frames == v.plan.frames && plan->height_px == v.plan.height_px &&
                     plan->width_px == v.plan.width_px && plan->channels == v.plan.channels,
                 what);
      const bool f32 = v.output.dtype == DType::kFloat32;
      const std::vector<int64_t> want =
          f32 ? std::vector<int64_t>{plan->frames, plan->channels, plan->height_px, plan->width_px}
              : std::vector<int64_t>{plan->frames, plan->height_px, plan->width_px, plan->channels};
      FUZZ_CHECK(v.output.shape == want &&
                     (v.output.dtype == DType::kUInt8 || v.output.dtype == DType::kFloat32),
                 what);
    }
    if (j.audio) {
      check_ref("audio_latent", j.audio->latent, j.audio->latent_region, false);
      check_ref("audio_output", j.audio->output, j.audio->output_region, true);
    }
    // What the daemon writes overlaps nothing else of the request.
    for (size_t a = 0; a < placed.size(); ++a) {
      for (size_t b = a + 1; b < placed.size(); ++b) {
        if (!placed[a].written && !placed[b].written) continue;
        const TensorRef& x = *placed[a].ref;
        const TensorRef& y = *placed[b].ref;
        // Same mapping, or two mappings (registrations) of one segment.
        const bool same = placed[a].region == placed[b].region ||
                          placed[a].region->name() == placed[b].region->name();
        const bool overlap = x.size > 0 && y.size > 0 && x.offset < y.offset + y.size &&
                             y.offset < x.offset + x.size;
        FUZZ_CHECK(!(same && overlap), what + " [" + placed[a].field + " overlaps " +
                                           placed[b].field + "]");
      }
    }
  }

  // The executor answers pending job `index` (cancelled jobs with their
  // cancellation; others per `outcome`).
  void Complete(size_t index, uint8_t outcome) {
    FakeSink::Pending p = std::move(sink_.pending()[index]);
    sink_.pending().erase(sink_.pending().begin() + static_cast<std::ptrdiff_t>(index));
    const engine::DecodeJob& j = *p.job;
    vaed::Result<engine::DecodeResult> result = engine::DecodeResult{};
    if (p.cancelled) {
      result = *p.cancelled;
    } else {
      switch (outcome) {
        case 4:
          result = vaed::ClientFault("latent: SIGBUS reading the segment (fuzz)");
          break;
        case 5:
          result = vaed::InvalidArgument("latent holds NaN (fuzz)");
          break;
        case 6:
          result = vaed::DeadlineExceeded("deadline passed (fuzz)");
          break;
        case 7:
          result = vaed::Internal("torch error (fuzz)");
          break;
        default:
          break;
      }
    }
    const RequestHandler::JobReplies replies = handler_.OnJobDone(j, result, now_);
    FUZZ_CHECK(replies.decode.request_id() == j.request_id,
               "the answer names request " + std::to_string(replies.decode.request_id()));
    // Each unregister answered here waited for this job: the client's own,
    // deferred earlier, answered once and OK.
    for (const v1::Reply& r : replies.unregistered) {
      const std::string what = "unregister reply " + r.ShortDebugString();
      FUZZ_CHECK(r.has_unregister_region() && !r.has_error(), what);
      auto it = std::find_if(deferred_.begin(), deferred_.end(), [&](const Deferred& d) {
        return d.client_id == j.client_id && d.request_id == r.request_id();
      });
      FUZZ_CHECK(it != deferred_.end(), what + " answers no deferred unregister of client " +
                                            std::to_string(j.client_id));
      deferred_.erase(it);
    }
  }

  void CheckInvariants() const {
    const vaed::server::ServerOptions& o = g->options.server;
    for (const ClientState* c : handler_.clients().All()) {
      const std::string who = "client " + std::to_string(c->id) + " (" + c->routing_id + ")";
      FUZZ_CHECK(c->regions.size() <= o.max_regions_per_client,
                 who + " holds " + std::to_string(c->regions.size()) + " regions");
      uint64_t sum = 0;
      for (const auto& [id, r] : c->regions) {
        FUZZ_CHECK(r.mapping != nullptr, who);
        sum += r.mapping->size();
        // In use by exactly the pending jobs naming it; awaiting unregister
        // only while in use (the last job's end drops it).
        const uint32_t users = sink_.PendingNaming(c->id, id);
        FUZZ_CHECK(r.decodes == users, who + ": region " + std::to_string(id) + " counts " +
                                           std::to_string(r.decodes) + " decodes, " +
                                           std::to_string(users) + " pending jobs name it");
        FUZZ_CHECK(!r.awaiting_unregister() || r.decodes > 0,
                   who + ": region " + std::to_string(id) + " awaits unregister, unused");
      }
      FUZZ_CHECK(sum == c->region_bytes, who + ": region_bytes " + std::to_string(c->region_bytes) +
                                             " but the regions hold " + std::to_string(sum));
      FUZZ_CHECK(c->region_bytes <= o.max_region_bytes_per_client, who);
      FUZZ_CHECK(c->in_flight <= o.max_in_flight_per_client,
                 who + " in_flight " + std::to_string(c->in_flight));
      FUZZ_CHECK(c->in_flight == sink_.PendingFor(c->id),
                 who + " in_flight " + std::to_string(c->in_flight) + " but " +
                     std::to_string(sink_.PendingFor(c->id)) + " jobs pending");
      // quarantine.h: a quarantined process's regions are unmapped, and it
      // cannot register new ones.
      FUZZ_CHECK(c->regions.empty() || handler_.quarantine().Check(c->identity, now_).ok(),
                 who + " of quarantined " + c->identity.ToString() + " holds " +
                     std::to_string(c->regions.size()) + " regions");
    }
    // No deferred reply is lost: while its client is known, its region
    // still awaits unregister under its request id.
    for (const Deferred& d : deferred_) {
      const ClientState* c = FindClient(d.client_id);
      if (c == nullptr) continue;  // gone: no reply is owed
      const bool waiting =
          std::any_of(c->regions.begin(), c->regions.end(), [&](const auto& entry) {
            return entry.second.unregister_request_id == d.request_id;
          });
      FUZZ_CHECK(waiting, "unregister " + std::to_string(d.request_id) + " of client " +
                              std::to_string(d.client_id) + " was never answered");
    }
  }

  void Trace(uint8_t action, const char* outcome) {
    if (trace_ != nullptr) trace_->push_back(std::string(ActionName(action)) + ":" + outcome);
  }

  // UnregisterRegion requests whose reply was deferred and not yet given.
  struct Deferred {
    uint64_t client_id;
    uint64_t request_id;
  };
  std::vector<Deferred> deferred_;
  FakeSink sink_;  // outlives handler_
  RequestHandler handler_;
  Clock::time_point now_;
  Conn conns_[kSlots];
  std::vector<std::string>* trace_;
};

void RunOne(const uint8_t* data, size_t size, std::vector<std::string>* trace) {
  FdpSource in(data, size);
  Session session(trace);
  session.Run(in);
}

// ------------------------------------------------------------ seeds

using F = SeedWriter::Field;
F Num(const char* name, uint64_t v) { return {name, {false, v, {}}}; }
F Text(const char* name, std::string v) { return {name, {true, 0, std::move(v)}}; }

struct Seed {
  const char* file;
  std::vector<SeedWriter::Step> steps;  // steps[0]: the parsers prelude
  std::vector<std::string> expect;      // the trace it must produce
};

std::string SerializedHello() {
  v1::Request r;
  r.set_request_id(7);
  r.mutable_hello()->set_protocol_version(vaed::kProtocolVersion);
  r.mutable_hello()->set_client_name("raw-client");
  return r.SerializeAsString();
}

std::string SerializedTensorRef() {
  v1::TensorRef t;
  t.set_region_id(1);
  t.set_offset_bytes(64);
  t.set_size_bytes(4 * 32 * 2 * 2);
  t.set_dtype(v1::DTYPE_FLOAT32);
  for (int64_t d : {1, 32, 2, 2}) t.add_shape(d);
  return t.SerializeAsString();
}

std::vector<Seed> Seeds() {
  const SeedWriter::Step none;
  const SeedWriter::Step hello = {Num("action", kHello), Num("request_id", 1), Text("hello.name", "seed")};
  const SeedWriter::Step reg = {Num("action", kRegister), Num("request_id", 2)};
  // latent float32 [1, 32, 2, 2] at offset 0, output uint8 [1, 16, 16, 3] at 8 KiB.
  auto decode = [](bool plan_only, uint64_t rid) {
    return SeedWriter::Step{Num("action", kDecode),     Num("request_id", rid),
                            Num("decode.model", 4),     Num("decode.plan_only", plan_only ? 1 : 0),
                            Num("decode.format", 1),    Num("latent.h", 2),
                            Num("latent.w", 2),         Num("ref.offset", 0),
                            Num("ref.offset", 8)};
  };
  return {
      {"hello", {none, hello}, {"hello:hello"}},
      {"register-region", {none, hello, reg}, {"hello:hello", "register:register_region"}},
      {"decode-plan-only",
       {none, hello, reg, decode(true, 3)},
       {"hello:hello", "register:register_region", "decode:decode"}},
      {"decode-real",
       {none, hello, reg, decode(false, 4), {Num("action", kCompleteJob)},
        {Num("action", kStatus), Num("request_id", 5)}},
       {"hello:hello", "register:register_region", "decode:job", "complete_job:-",
        "status:status"}},
      {"status-heartbeat-goodbye",
       {none, hello, {Num("action", kStatus)}, {Num("action", kHeartbeat)}, {Num("action", kGoodbye)},
        {Num("action", kTick), Num("dt", 255)}, {Num("action", kFillStatus)}},
       {"hello:hello", "status:status", "heartbeat:heartbeat", "goodbye:goodbye", "tick:-",
        "fill_status:-"}},
      {"garbage",
       {none,
        {Num("action", kRaw), Text("raw.payload", std::string("\x0a\xff\x13garbage\x00\x01", 12))},
        {Num("action", kRaw), Num("frames", 15), Text("raw.payload", "oversized")},
        {Num("action", kRaw), Num("raw.kind", 15)}},
       {"raw:error(protocol_error)", "raw:error(protocol_error)", "raw:error(protocol_error)"}},
      {"raw-hello", {none, {Num("action", kRaw), Text("raw.payload", SerializedHello())}},
       {"raw:hello"}},
      {"quarantine-release",
       {none, hello,
        {Num("action", kRegister), Num("reg.name", 6), Text("reg.name_raw", "no/such")},
        {Num("action", kRegister), Num("reg.name", 6), Text("reg.name_raw", "no/such")},
        {Num("action", kRegister), Num("reg.name", 6), Text("reg.name_raw", "no/such")},
        {Num("action", kRegister), Num("reg.name", 6), Text("reg.name_raw", "no/such")},
        {Num("action", kRegister), Num("reg.name", 6), Text("reg.name_raw", "no/such")},
        {Num("action", kRegister)},
        {Num("action", kRelease), Num("conn", 1), Num("peer", 13)},
        {Num("action", kRegister)}, hello, {Num("action", kRegister)}},
       {"hello:hello", "register:error(invalid_argument)", "register:error(invalid_argument)",
        "register:error(invalid_argument)", "register:error(invalid_argument)",
        "register:error(invalid_argument)", "register:error(quarantined)",
        "release:release_quarantine", "register:error(unknown_client)", "hello:hello",
        "register:register_region"}},
      // A connection without peer credentials whose decodes fault in the
      // executor five times: quarantined by OnJobReply, its client dropped,
      // and it stays refused.
      {"peerless-executor-faults",
       {none, {Num("action", kHello), Num("peer", 9), Num("request_id", 1)}, reg,
        decode(false, 3), {Num("action", kCompleteJob), Num("job.outcome", 4)},
        decode(false, 4), {Num("action", kCompleteJob), Num("job.outcome", 4)},
        decode(false, 5), {Num("action", kCompleteJob), Num("job.outcome", 5)},
        decode(false, 6), {Num("action", kCompleteJob), Num("job.outcome", 4)},
        decode(false, 7), {Num("action", kCompleteJob), Num("job.outcome", 4)},
        reg, {Num("action", kFillStatus)}},
       {"hello:hello", "register:register_region", "decode:job", "complete_job:-", "decode:job",
        "complete_job:-", "decode:job", "complete_job:-", "decode:job", "complete_job:-",
        "decode:job", "complete_job:-", "register:error(quarantined)", "fill_status:-"}},
      // An unregister of the region a queued decode uses: deferred; a
      // decode naming it and a second unregister are refused; the job's
      // end answers it, after which the region is gone.
      {"unregister-while-decoding",
       {none, hello, reg, decode(false, 3), {Num("action", kUnregister), Num("request_id", 4)},
        decode(false, 5), {Num("action", kUnregister), Num("request_id", 6)},
        {Num("action", kCompleteJob)}, {Num("action", kUnregister), Num("request_id", 7)}},
       {"hello:hello", "register:register_region", "decode:job", "unregister:deferred",
        "decode:error(failed_precondition)", "unregister:error(failed_precondition)",
        "complete_job:-", "unregister:error(not_found)"}},
      {"parsers",
       {{Num("direct", 3), Text("direct.peer", "localhost:1000:1000:4242"),
         Text("direct.tensor_ref", SerializedTensorRef())}},
       {}},
  };
}

int WriteSeeds(const std::string& dir) {
  for (const Seed& s : Seeds()) {
    SeedWriter w(s.steps);
    Session(nullptr).Run(w);
    const std::string bytes = w.Finish();
    std::vector<std::string> trace;
    RunOne(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &trace);
    if (trace != s.expect) {
      std::fprintf(stderr, "seed %s replays as:", s.file);
      for (const std::string& t : trace) std::fprintf(stderr, " %s", t.c_str());
      std::fprintf(stderr, "\n  expected:");
      for (const std::string& t : s.expect) std::fprintf(stderr, " %s", t.c_str());
      std::fprintf(stderr, "\n");
      return 1;
    }
    const std::string path = dir + "/" + s.file;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
    std::printf("%s (%zu bytes):", path.c_str(), bytes.size());
    for (const std::string& t : trace) std::printf(" %s", t.c_str());
    std::printf("\n");
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  InitGlobal();
  for (int i = 1; i < *argc; ++i) {
    if (std::string_view((*argv)[i]) == "--write-seeds") {
      if (i + 1 >= *argc) {
        std::fprintf(stderr, "usage: %s --write-seeds DIR\n", (*argv)[0]);
        std::exit(2);
      }
      std::exit(WriteSeeds((*argv)[i + 1]));
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RunOne(data, size, nullptr);
  return 0;
}
