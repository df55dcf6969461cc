#include "daemon/server/metrics_http.h"

#include <httplib.h>
#include <netdb.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

namespace vaed::server {

namespace {

constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";
constexpr time_t kIoTimeoutSeconds = 2;
constexpr size_t kServerThreads = 2;

// httplib's default sets SO_REUSEPORT, which would let a second daemon bind
// the same port silently and take half the scrapes. SO_REUSEADDR alone
// still allows a restart while old connections sit in TIME_WAIT.
void ServerSocketOptions(int sock) {
  const int yes = 1;
  (void)setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
}

// The one getaddrinfo adapter of the endpoint: a bad metrics.address is a
// config error, told apart from a bind failure.
Status CheckAddressResolves(const std::string& address) {
  if (address.empty()) return InvalidArgument("metrics.address must not be empty");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(address.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    return InvalidArgument("metrics.address '" + address +
                           "' does not resolve: " + gai_strerror(rc));
  }
  freeaddrinfo(result);
  return Status::Ok();
}

// What the exception in flight says (inside a catch block only).
std::string CurrentExceptionMessage() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

bool IsWildcard(const std::string& address) {
  return address == "0.0.0.0" || address == "::" || address == "[::]";
}

}  // namespace

MetricsServer::MetricsServer(const Metrics* metrics, std::string address,
                             std::function<void()> before_render)
    : metrics_(metrics),
      address_(std::move(address)),
      before_render_(std::move(before_render)),
      server_(std::make_unique<httplib::Server>()) {}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const Metrics* metrics,
                                                            std::string address, uint16_t port,
                                                            std::function<void()> before_render) {
  VAED_RETURN_IF_ERROR(CheckAddressResolves(address));
  std::unique_ptr<MetricsServer> s(
      new MetricsServer(metrics, std::move(address), std::move(before_render)));
  s->InstallHandlers();
  httplib::Server& server = *s->server_;

  // httplib reports a failed bind as false / -1 and leaves errno from the
  // failing bind(2) (its clean-up calls do not set it on success).
  errno = 0;
  int bound = -1;
  if (port == 0) {
    bound = server.bind_to_any_port(s->address_);
  } else if (server.bind_to_port(s->address_, port)) {
    bound = port;
  }
  if (bound <= 0) {
    const int err = errno;
    std::string why = err != 0
                          ? std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"
                          : std::string("bind failed");
    return Unavailable("metrics.port " + std::to_string(port) + " on metrics.address '" +
                       s->address_ + "' cannot be bound: " + why +
                       (err == EADDRINUSE ? "; another process holds it" : ""));
  }
  s->port_ = static_cast<uint16_t>(bound);

  auto finished = std::make_shared<std::atomic<bool>>(false);
  s->thread_ = std::thread([server_ptr = s->server_.get(), finished] {
    // No exception may leave a thread entry point.
    try {
      if (!server_ptr->listen_after_bind()) {
        spdlog::error("metrics: the Prometheus endpoint stopped serving");
      }
    } catch (const std::exception& e) {
      spdlog::error("metrics: the Prometheus endpoint failed: {}", e.what());
    } catch (...) {
      spdlog::error("metrics: the Prometheus endpoint failed");
    }
    finished->store(true);
  });
  // stop() only acts on a running server: wait until listening has begun
  // (the first thing listen_after_bind() does), so that the destructor can
  // always end it.
  while (!server.is_running()) {
    if (finished->load()) {
      return Unavailable("metrics: the endpoint on metrics.port " + std::to_string(s->port_) +
                         " stopped before serving");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return s;
}

namespace {

// httplib's pool with a bound on accepted connections waiting for a
// worker: past it the accept thread serves the connection itself, so it
// stops accepting meanwhile and further connections wait in the kernel's
// listen backlog instead of holding the daemon's descriptors (many idle or
// trickling connections must never exhaust them: the control socket needs
// them).
class BoundedTaskQueue : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(size_t threads, size_t max_pending) : pool_(threads), max_(max_pending) {}
  void enqueue(std::function<void()> fn) override {
    if (pending_.fetch_add(1) >= max_) {
      fn();
      pending_.fetch_sub(1);
      return;
    }
    pool_.enqueue([this, fn = std::move(fn)] {
      fn();
      pending_.fetch_sub(1);
    });
  }
  void shutdown() override { pool_.shutdown(); }

 private:
  httplib::ThreadPool pool_;
  const size_t max_;
  std::atomic<size_t> pending_{0};
};

// Accepted connections in the pool's queue or being served, at most.
constexpr size_t kMaxPendingConnections = 16;

}  // namespace

void MetricsServer::InstallHandlers() {
  httplib::Server& server = *server_;
  server.new_task_queue = [] {
    return new BoundedTaskQueue(kServerThreads, kMaxPendingConnections);
  };
  server.set_socket_options(ServerSocketOptions);
  // One request per connection, and a connection that sends nothing is
  // dropped after 1 s: stopping waits for neither.
  server.set_keep_alive_max_count(1);
  server.set_keep_alive_timeout(1);
  server.set_read_timeout(kIoTimeoutSeconds, 0);
  server.set_write_timeout(kIoTimeoutSeconds, 0);
  server.set_payload_max_length(4096);

  server.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET" || req.method == "HEAD") {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    res.set_content("method not allowed; use GET\n", "text/plain; charset=utf-8");
    return httplib::Server::HandlerResponse::Handled;
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    // Exceptions stop here, not in httplib (whose handling differs between
    // versions): this scrape fails with 500, the endpoint serves on.
    try {
      if (before_render_) before_render_();
      res.set_content(metrics_->Render(), kContentType);
    } catch (...) {
      const std::string why = CurrentExceptionMessage();
      spdlog::error("metrics: rendering a scrape failed: {}", why);
      res.status = 500;
      res.set_content("rendering the metrics failed: " + why + "\n",
                      "text/plain; charset=utf-8");
    }
  });
  server.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        "vaed Prometheus endpoint\n\n"
        "/metrics  metrics in the Prometheus text format 0.0.4\n",
        "text/plain; charset=utf-8");
  });
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404) {
      res.set_content("not found; metrics are at /metrics\n", "text/plain; charset=utf-8");
    }
  });
}

MetricsServer::~MetricsServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string MetricsServer::url() const {
  std::string host = IsWildcard(address_) ? "127.0.0.1" : address_;
  if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
  return "http://" + host + ":" + std::to_string(port_) + "/metrics";
}

}  // namespace vaed::server
