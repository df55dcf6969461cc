// Client::Impl: the state behind a vaed::client::Client and the request
// cycle every call goes through. Internal to the client library.
//
// Where each job lives:
//   connection.cc  the raw socket (vaed/raw_socket.h): a fresh connection with Hello,
//                  sending framed messages, and Exchange() (one request and
//                  its reply, with heartbeats while waiting)
//   reconnect.cc   getting back to a daemon that went away: Reconnect(),
//                  re-registering regions, CallLocked() (send, and retry
//                  once after a reconnect), region id translation
//   heartbeat.cc   the heartbeat thread
//   client.cc      the public Client calls (and ClientProtocol's) on top of these
//
// Locking: `mu` serializes all use of the socket and of the state marked
// "guarded by mu"; every method documented "mu held" requires it. The
// atomics may be read without it. Both locks are vaed::Mutex (vaed/mutex.h):
// the fields are VAED_GUARDED_BY and the "mu held" methods VAED_REQUIRES,
// so clang's thread-safety analysis checks all of this at compile time.
// The heartbeat thread holds hb_mu and only try_locks mu under it.
#ifndef VAED_CLIENT_SRC_CLIENT_IMPL_H_
#define VAED_CLIENT_SRC_CLIENT_IMPL_H_

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>  // std::condition_variable_any
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "cuda_stream_sync.h"
#include "vaed/client.h"
#include "vaed/framing.h"
#include "vaed/mutex.h"
#include "vaed/v1/vaed.pb.h"

namespace vaed::client {

// User-visible region ids that would collide with one already handed out
// (daemon ids restart at 1 after a daemon restart) come from here; daemon
// ids never get this large.
inline constexpr uint64_t kFirstSyntheticRegionId = uint64_t{1} << 62;

// Largest reply taken from the daemon (status replies with long client
// lists are the largest; decode replies are a few KiB).
inline constexpr uint64_t kMaxReplyBytes = uint64_t{64} << 20;

// Hidden: a class nested in an exported class (Client is VAED_CLIENT_API)
// would otherwise be exported with it.
struct __attribute__((visibility("hidden"))) Client::Impl {
  // A region this client registered, as needed to register it again: the
  // request itself (host: segment name and size; cuda: IPC handle, size,
  // device UUID).
  struct Region {
    v1::RegisterRegion registration;
    uint64_t daemon_id = 0;  // the id at the current daemon; 0 while `lost`
    Status lost;             // why the latest re-registration failed; OK otherwise

    bool is_cuda() const { return registration.has_cuda(); }
    // For messages: "'<segment name>'" or "CUDA allocation of N bytes on GPU-...".
    std::string Describe() const;
  };

  // mu held. Sends `registration` (a RegisterRegion the caller filled) and
  // records the region under a user-visible id, which it returns (see
  // Client::RegisterRegion for the ids). Defined in client.cc.
  Result<uint64_t> RegisterLocked(const v1::RegisterRegion& registration) VAED_REQUIRES(mu);

  // mu held. The CUDA stream synchronisation of this client, created on
  // first use (loads the driver). Errors: CudaDriver::Get()'s.
  Result<internal::CudaStreamSync*> CudaSync() VAED_REQUIRES(mu);

  // mu held. Whether user-visible region `user_id` is a CUDA region.
  bool IsCudaRegion(uint64_t user_id) const VAED_REQUIRES(mu);
  // mu held. Whether `request` names a CUDA region, latent or output (then
  // Decode() sends an inputs-ready event).
  bool NamesCudaRegion(const DecodeRequest& request) const VAED_REQUIRES(mu);

  // Fills a request's body (client_id and request_id are set afterwards).
  // Called under `mu` once per attempt, so region ids are translated for
  // the daemon the attempt goes to. A builder lambda that reads guarded
  // state is declared VAED_REQUIRES(<impl>->mu) (client.cc).
  using Builder = std::function<Status(v1::Request*)>;
  using ProgressCallback = std::function<void(const Progress&)>;
  using FinalRangeCallback = std::function<void(const FinalRange&)>;
  // A Hello reply as the protocol sent it (ClientProtocol::Hello) and as
  // Client::hello() hands it out.
  struct HelloRecord {
    v1::HelloReply message;
    HelloReply reply;
  };

  // The running streamed Decode (DecodeRequest::final_range): its callback
  // (null once it threw or a CUDA wait failed), the caller's stream for
  // CUDA ranges, and per stage the end of what was delivered; ranges are
  // cumulative, so a repeated or skipped one is delivered as the part past
  // that end. `error`: a CUDA wait that failed (the range was not passed
  // on), for Decode() to return once the reply is in.
  struct FinalRangeDelivery {
    const FinalRangeCallback* callback = nullptr;
    void* cuda_stream = nullptr;
    uint64_t video_frames = 0;
    uint64_t audio_samples = 0;
    Status error;
    bool delivered_any() const { return video_frames > 0 || audio_samples > 0; }
  };

  explicit Impl(const ClientOptions& o) : options(o) {}

  // kFailedPrecondition in a forked child, else OK (see "fork()" in client.h).
  Status CheckProcess() const;

  // --- connection.cc -----------------------------------------------------

  // mu held. Closes the current socket (dropping whatever it still
  // queues), connects a fresh one, waits up to `connect_ms` for the
  // connection to be made, then says Hello and waits up to `reply_ms` for
  // the reply (0 = forever, both); adopts the reply's client id and
  // settings and clears `broken`. Nothing is sent before the connection
  // exists (the socket reports it with a notice carrying its routing id),
  // so an attempt that finds no daemon leaves no stray Hello behind (it
  // would register a client nobody uses). ZeroMQ does not reconnect the
  // socket by itself: a closed connection stays closed, and a send on it
  // fails at once. Errors: kUnavailable (no connection or no reply in
  // time), the daemon's refusal of the Hello.
  Status HelloOnFreshSocket(int connect_ms, int reply_ms) VAED_REQUIRES(mu);

  // mu held. Sends `bytes` and waits up to `timeout_ms` (0 = forever) for
  // the reply with request id `expect_id` (0 accepts any reply but those
  // to heartbeats sent here). Replies to earlier, timed-out requests are
  // discarded; Progress messages of `expect_id` go to ReportProgress().
  // With `ping`, a Heartbeat goes out after every WaitPingInterval() of
  // silence; when Liveness() of them in a row get no answer within their
  // interval, `broken` is set and kUnavailable returned. Any message from
  // the daemon restores the count. A timeout returns kUnavailable with
  // `broken` untouched. Never throws: a ZeroMQ error becomes its Status
  // (vaed/zmq_status.h); any other exception becomes kResourceExhausted /
  // kInternal and sets `broken` (the stream may be mid-message).
  Result<v1::Reply> Exchange(const std::string& bytes, uint64_t expect_id, int timeout_ms,
                             bool ping) VAED_REQUIRES(mu);

  // --- reconnect.cc ------------------------------------------------------

  // mu held; the request is idempotent. Builds and sends a request and
  // waits for its reply, reconnecting first when the daemon was found gone
  // before, and reconnecting and resending once when it is found gone or
  // answers kUnknownClient now. What `build` throws comes back as a Status.
  Result<v1::Reply> CallLocked(const Builder& build, int timeout_ms) VAED_REQUIRES(mu);
  // CallLocked() under a lock of its own. mu not held.
  Result<v1::Reply> Call(const Builder& build, int timeout_ms) VAED_EXCLUDES(mu);
  // Call() with options.request_timeout_ms, then the reply's body (read by
  // `body`), checked to be `expected`; `what` names the request in errors.
  // Defined in client.cc, its only user. mu not held.
  template <typename Body>
  Result<Body> CallForBody(const Builder& build, v1::Reply::BodyCase expected,
                           std::string_view what, const Body& (v1::Reply::*body)() const)
      VAED_EXCLUDES(mu);

  // mu held. Hello on fresh sockets with back-off until one is answered
  // and the regions are registered again, for up to
  // options.reconnect_timeout_ms. A refusal other than kUnavailable
  // (version mismatch, quarantine, permissions) ends it at once.
  Status Reconnect() VAED_REQUIRES(mu);
  bool MayReconnect() const { return options.reconnect_timeout_ms > 0; }

  // mu held. The daemon's id for the region the user knows as `user_id`.
  // An id this client never registered passes unchanged, for the daemon to
  // reject with its own message, unless after a reconnect it is the
  // daemon's id of another of this client's regions (kNotFound). A region
  // lost in a reconnect fails with the reason, prefixed by `field`.
  Result<uint64_t> DaemonRegionId(uint64_t user_id, std::string_view field) const VAED_REQUIRES(mu);

  // --- heartbeat.cc ------------------------------------------------------

  // Starts the heartbeat thread when options.heartbeats is set and the
  // daemon asked for heartbeats. Errors: kResourceExhausted / kInternal
  // when the thread cannot be started.
  Status StartHeartbeats();
  // Stops and joins the heartbeat thread, if one runs. mu not held.
  void StopHeartbeats() noexcept VAED_EXCLUDES(mu, hb_mu);

  // --- state ---------------------------------------------------------------

  // The process that connected (see "fork()" in client.h).
  const pid_t owner_pid = ::getpid();
  const ClientOptions options;
  zmq::context_t context{1};

  Mutex mu;  // serializes all use of `socket` and the state below
  // The raw socket (vaed/raw_socket.h) with vaed's framing (vaed/framing.h); guarded by mu,
  // replaced on reconnect, with the routing id of its one connection and
  // the reassembly of the daemon's byte stream.
  std::unique_ptr<zmq::socket_t> socket VAED_GUARDED_BY(mu);
  std::string connection_id VAED_GUARDED_BY(mu);
  wire::FrameReader reader VAED_GUARDED_BY(mu) = wire::FrameReader(kMaxReplyBytes);
  uint64_t next_request_id VAED_GUARDED_BY(mu) = 1;
  // The running Decode's progress callback, or null; guarded by mu. Reset
  // to null by ReportProgress() when the callback throws.
  const ProgressCallback* on_progress VAED_GUARDED_BY(mu) = nullptr;
  // What the progress callback threw, for Decode() to rethrow once the
  // lock is released; guarded by mu.
  std::exception_ptr progress_error VAED_GUARDED_BY(mu);
  // The running Decode's streamed output; guarded by mu. Its callback's
  // exception goes to progress_error too.
  FinalRangeDelivery streamed VAED_GUARDED_BY(mu);
  // The daemon was found gone (heartbeats unanswered, or the connection
  // dropped), answered kUnknownClient, or a failure inside the library
  // struck mid-request: the next call reconnects before it sends. Guarded
  // by mu.
  bool broken VAED_GUARDED_BY(mu) = false;
  std::map<uint64_t, Region> regions VAED_GUARDED_BY(mu);  // by user-visible id
  // Events of stream-ordered CUDA decodes; null until the first one.
  // Declared after `regions`, so destroyed before them (and before the
  // socket: nothing it owns is the daemon's).
  std::unique_ptr<internal::CudaStreamSync> cuda_sync VAED_GUARDED_BY(mu);
  uint64_t next_synthetic_region_id VAED_GUARDED_BY(mu) = kFirstSyntheticRegionId;
  // Every Hello reply, latest last, so hello() references stay valid.
  std::vector<std::unique_ptr<const HelloRecord>> hellos VAED_GUARDED_BY(mu);
  std::atomic<const HelloRecord*> hello{nullptr};
  std::atomic<uint64_t> client_id{0};
  std::atomic<uint64_t> reconnects{0};
  std::atomic<uint32_t> heartbeat_interval_ms{0};

  Mutex hb_mu;
  std::condition_variable_any hb_cv;  // waits on hb_mu: hb_stop
  bool hb_stop VAED_GUARDED_BY(hb_mu) = false;
  std::thread heartbeat;

 private:
  // connection.cc
  // mu held. Queues one framed message to the daemon without blocking;
  // false when it cannot be queued (no connection, the daemon closed it,
  // or its queue is full). Throws zmq::error_t on other errors.
  bool SendMessage(const std::string& bytes) VAED_REQUIRES(mu);
  // mu held. The next whole message from the daemon, waiting up to
  // `wait_ms` (-1 = forever) for bytes; nullopt when none completed in
  // time. kUnavailable (and `broken`) when the daemon closed the
  // connection; kProtocolError for a reply over kMaxReplyBytes.
  Result<std::optional<std::string>> NextMessage(long wait_ms) VAED_REQUIRES(mu);
  // mu held. Sends a Heartbeat without waiting for its reply; returns its
  // request id (0 when it could not be queued).
  uint64_t SendPing() VAED_REQUIRES(mu);
  // mu held. Exchange() without its exception guard.
  Result<v1::Reply> ExchangeOrThrow(const std::string& bytes, uint64_t expect_id, int timeout_ms,
                                    bool ping) VAED_REQUIRES(mu);
  // mu held. Calls on_progress with `progress` (copied into the client's
  // own type, vaed/replies.h); if it throws, keeps the
  // exception in progress_error and stops calling it.
  void ReportProgress(const v1::Progress& progress) VAED_REQUIRES(mu);
  // mu held. Passes the part of `range` past what was delivered to
  // streamed.callback (after making the caller's stream wait on its CUDA
  // event); if the callback throws, keeps the exception in progress_error
  // and stops calling it.
  void ReportFinalRange(const v1::FinalRange& range) VAED_REQUIRES(mu);
  uint32_t Liveness() const;
  // How long a waiting call stays silent before it sends a Heartbeat.
  std::chrono::milliseconds WaitPingInterval() const;

  // reconnect.cc
  // mu held, Hello done. Registers every remembered region with the
  // current daemon. A region the daemon refuses is marked lost (requests
  // naming it fail with the reason); kUnavailable when the daemon went
  // away again.
  Status ReregisterRegions() VAED_REQUIRES(mu);
  // mu held. CallLocked() without its exception guard.
  Result<v1::Reply> CallLockedOrThrow(const Builder& build, int timeout_ms) VAED_REQUIRES(mu);

  // heartbeat.cc
  // The thread's body: takes hb_mu, and mu (try_lock) for each beat.
  void HeartbeatLoop() noexcept VAED_EXCLUDES(mu, hb_mu);
  // mu held. One heartbeat of the thread; `missed` counts unanswered ones.
  void BeatOnce(std::chrono::milliseconds interval, uint32_t* missed) VAED_REQUIRES(mu);
};

// Turns an error reply into its Status; checks the body otherwise.
Status CheckReply(const v1::Reply& reply, v1::Reply::BodyCase expected, std::string_view what);

// True for a reply that is the daemon's kUnknownClient.
bool IsUnknownClient(const Result<v1::Reply>& reply);

}  // namespace vaed::client

#endif  // VAED_CLIENT_SRC_CLIENT_IMPL_H_
