// The Prometheus scrape endpoint: a small HTTP server (cpp-httplib) on its
// own thread serving Metrics::Render().
//
//   GET /metrics  200, Content-Type "text/plain; version=0.0.4; charset=utf-8"
//   GET /         200, a short text page that links /metrics
//   other paths   404;  methods other than GET and HEAD: 405
//
// Connections are not kept alive (one request each; Prometheus scrapes
// every few seconds at most), a connection that sends nothing is dropped
// after 1 s and reads/writes time out after 2 s, so that stopping never
// waits on a slow or idle scraper for long. Requests are served by a pool
// of 2 threads (the accept loop is a third).
//
// Thread-safety: Start() and the destructor from one owning thread;
// port() and url() from any thread.
#ifndef VAED_DAEMON_SERVER_METRICS_HTTP_H_
#define VAED_DAEMON_SERVER_METRICS_HTTP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "daemon/server/metrics.h"
#include "vaed/status.h"

namespace httplib {
class Server;
}

namespace vaed::server {

class MetricsServer {
 public:
  // Binds `address`:`port` (port 0: any free port; see port()) and starts
  // serving `metrics`, which must outlive the server. `before_render`, if
  // set, runs on a server thread before each /metrics render (e.g. to
  // refresh gauges); it must be thread-safe. If it (or rendering) throws,
  // that scrape is answered 500 with the exception's message and logged;
  // the endpoint serves the next one.
  //
  // Errors: kInvalidArgument naming metrics.address when the address is
  // empty or does not resolve; kUnavailable naming metrics.port when the
  // address cannot be bound (port taken by another process, address not on
  // this host, privileged port).
  static Result<std::unique_ptr<MetricsServer>> Start(const Metrics* metrics, std::string address,
                                                      uint16_t port,
                                                      std::function<void()> before_render = {});

  // Stops accepting, lets a request in progress finish (bounded by the 2 s
  // timeouts) and joins the server thread.
  ~MetricsServer();

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The bound port (the actual one when Start() was given 0).
  uint16_t port() const { return port_; }
  // "http://<address>:<port>/metrics", the address as given ([...] around
  // IPv6 literals); "127.0.0.1" for a wildcard address (0.0.0.0, ::).
  std::string url() const;

 private:
  MetricsServer(const Metrics* metrics, std::string address, std::function<void()> before_render);
  void InstallHandlers();

  const Metrics* const metrics_;
  const std::string address_;
  const std::function<void()> before_render_;
  uint16_t port_ = 0;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace vaed::server

#endif  // VAED_DAEMON_SERVER_METRICS_HTTP_H_
