// Routes spdlog's default logger into a string for a test's duration, and
// puts the daemon's text log format back afterwards (tests of log output).
#ifndef VAED_TESTS_COMMON_CAPTURED_LOG_H_
#define VAED_TESTS_COMMON_CAPTURED_LOG_H_

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "daemon/server/logging.h"

namespace vaed::testing {

class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() {
    spdlog::set_default_logger(previous_);
    server::SetupLogging(server::LogFormat::kText, server::LogLevel::kInfo);
  }

  std::vector<std::string> Lines() {
    spdlog::default_logger()->flush();
    std::vector<std::string> lines;
    std::istringstream in(out_.str());
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace vaed::testing

#endif  // VAED_TESTS_COMMON_CAPTURED_LOG_H_
