// Runs the vaectl binary: behaviour that needs no daemon.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace {

using ::testing::HasSubstr;

struct CliRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

CliRun Vaectl(const std::string& args) {
  CliRun r;
  const std::string command = std::string(VAECTL_PATH) + " " + args + " 2>&1";
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST(VaectlCliTest, StatusWithoutDaemonSaysSoAndExits2) {
  const CliRun r = Vaectl("--socket /nonexistent/vaed-test.sock status");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("vaed is not running at /nonexistent/vaed-test.sock: "));
}

TEST(VaectlCliTest, GlobalOptionsMayFollowTheSubcommand) {
  const CliRun r = Vaectl("status --json --socket /nonexistent/vaed-test.sock");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("vaed is not running at /nonexistent/vaed-test.sock"));
}

TEST(VaectlCliTest, DecodeWithoutDaemonFailsBeforeWritingAnything) {
  const CliRun r = Vaectl(
      "--socket /nonexistent/vaed-test.sock decode --random-latent 1,32,4,4 --format none");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("vaed is not running"));
}

TEST(VaectlCliTest, DecodeNeedsAFileOrRandomLatent) {
  const CliRun r = Vaectl("decode");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("give a LATENT_FILE or --random-latent"));
}

TEST(VaectlCliTest, DecodeRejectsMalformedRandomShape) {
  const CliRun r = Vaectl("--socket /nonexistent/x.sock decode --random-latent 1,a,4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("'a' is not a positive integer"));
}

TEST(VaectlCliTest, DecodeRejectsUnknownFormat) {
  const CliRun r = Vaectl("decode --random-latent 1,32,4,4 --format gif");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("--format"));
}

TEST(VaectlCliTest, HelpListsSubcommandsAndExitCodes) {
  const CliRun r = Vaectl("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("status"));
  EXPECT_THAT(r.output, HasSubstr("decode"));
  EXPECT_THAT(r.output, HasSubstr("--socket"));
  EXPECT_THAT(r.output, HasSubstr("Exit status"));
}

TEST(VaectlCliTest, SubcommandIsRequired) {
  const CliRun r = Vaectl("");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
