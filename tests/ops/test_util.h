// Helpers shared by the tests in tests/ops: a scratch directory, whole-file
// reads, running a shell command with its output captured, table rows, a
// directory put first on PATH (stand-in tools).
#ifndef VAED_TESTS_OPS_TEST_UTIL_H_
#define VAED_TESTS_OPS_TEST_UTIL_H_

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace vaed::ops_test {

// A fresh directory under the system temp dir, removed with its contents
// by the destructor.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("vaed-ops-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The path of `name` inside the directory.
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

// The whole file, or "" when it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct CommandResult {
  int exit_code = -1;  // -1 when it could not run or died from a signal
  std::string out;     // what it wrote to stdout
};

// Runs `command` with /bin/sh and captures its stdout (redirect stderr in
// the command itself when it is wanted).
inline CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// The cells of the first line of `frame` whose first cell is `first`, for
// the tables vaectl draws: columns are separated by two or more spaces and
// cells hold at most single spaces ("12.5 ms"); a terminal's CR LF line
// ends are accepted. Empty when there is no such line.
inline std::vector<std::string> TableRow(const std::string& frame, const std::string& first) {
  std::istringstream lines(frame);
  std::string line;
  static const std::regex kSeparator(" {2,}");
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t begin = line.find_first_not_of(' ');
    if (begin == std::string::npos) continue;
    const std::string trimmed = line.substr(begin);
    std::vector<std::string> cells(
        std::sregex_token_iterator(trimmed.begin(), trimmed.end(), kSeparator, -1), {});
    if (!cells.empty() && cells[0] == first) return cells;
  }
  return {};
}

// Puts `dir` first on PATH for the life of this object (e.g. a stand-in
// ffmpeg). Not thread-safe: PATH is the process's.
class ScopedPathPrefix {
 public:
  explicit ScopedPathPrefix(const std::string& dir) {
    const char* old = std::getenv("PATH");
    had_path_ = old != nullptr;
    if (had_path_) old_path_ = old;
    ::setenv("PATH", (dir + ":" + old_path_).c_str(), 1);
  }
  ~ScopedPathPrefix() {
    if (had_path_) {
      ::setenv("PATH", old_path_.c_str(), 1);
    } else {
      ::unsetenv("PATH");
    }
  }
  ScopedPathPrefix(const ScopedPathPrefix&) = delete;
  ScopedPathPrefix& operator=(const ScopedPathPrefix&) = delete;

 private:
  bool had_path_ = false;
  std::string old_path_;
};

// Writes an executable shell script `path` whose body is `body` (after
// "#!/bin/sh"): a stand-in for a tool.
inline void WriteScript(const std::string& path, const std::string& body) {
  {
    std::ofstream f(path);
    f << "#!/bin/sh\n" << body;
  }
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
}

// The lines of `text` (each ended by '\n'; a last unterminated line is
// dropped).
inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0, end;
  while ((end = text.find('\n', begin)) != std::string::npos) {
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

}  // namespace vaed::ops_test

#endif  // VAED_TESTS_OPS_TEST_UTIL_H_
