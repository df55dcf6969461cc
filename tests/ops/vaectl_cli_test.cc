// Runs the vaectl binary: behaviour that needs no daemon.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"
#include "tests/common/test_paths.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Runs the built vaectl; stdout and stderr together.
vaed::ops_test::CommandResult Vaectl(const std::string& args) {
  return vaed::ops_test::RunCommand(std::string(VAECTL_PATH) + " " + args + " 2>&1");
}

TEST(VaectlCliTest, StatusWithoutDaemonSaysSoAndExits2) {
  const auto r = Vaectl("--socket /nonexistent/vaed-test.sock status");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("vaed is not running at /nonexistent/vaed-test.sock: "));
}

// Regression: vaectl ignored $VAED_SOCKET while the Python
// client honoured it. One rule (vaed/client.h Client::SocketPath): --socket,
// else $VAED_SOCKET, else /run/vaed/vaed.sock.
TEST(VaectlCliTest, SocketComesFromTheFlagElseVaedSocketElseTheDefault) {
  const std::string env = "VAED_SOCKET=/nonexistent/vaed-env.sock ";
  const auto from_env =
      vaed::ops_test::RunCommand(env + VAECTL_PATH + " status 2>&1");
  EXPECT_EQ(from_env.exit_code, 2);
  EXPECT_THAT(from_env.out, HasSubstr("vaed is not running at /nonexistent/vaed-env.sock"));
  const auto flag_wins = vaed::ops_test::RunCommand(
      env + VAECTL_PATH + " --socket /nonexistent/vaed-flag.sock status 2>&1");
  EXPECT_THAT(flag_wins.out, HasSubstr("vaed is not running at /nonexistent/vaed-flag.sock"));
  const auto empty_env =
      vaed::ops_test::RunCommand(std::string("VAED_SOCKET= ") + VAECTL_PATH + " status 2>&1");
  EXPECT_THAT(empty_env.out, HasSubstr("at /run/vaed/vaed.sock"));
  EXPECT_THAT(Vaectl("--help").out, HasSubstr("VAED_SOCKET"));
}

TEST(VaectlCliTest, PlanChecksItsShapesBeforeConnecting) {
  const auto none = Vaectl("--socket /nonexistent/x.sock plan");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.out, HasSubstr("no latent shape given"));
  const auto bad = Vaectl("--socket /nonexistent/x.sock plan --shape 1,24,x");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.out, HasSubstr("--shape"));
  EXPECT_THAT(bad.out, Not(HasSubstr("not running")));
  const auto good = Vaectl("--socket /nonexistent/x.sock plan --shape 1,24,33,96,168");
  EXPECT_EQ(good.exit_code, 2);  // as far as connecting
}

TEST(VaectlCliTest, GlobalOptionsMayFollowTheSubcommand) {
  const auto r = Vaectl("status --json --socket /nonexistent/vaed-test.sock");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("vaed is not running at /nonexistent/vaed-test.sock"));
}

TEST(VaectlCliTest, DecodeWithoutDaemonFailsBeforeWritingAnything) {
  const auto r =
      Vaectl("--socket /nonexistent/vaed-test.sock decode --random-latent 1,32,4,4 --format none");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("vaed is not running"));
}

// Regression: usage errors exited 105/109 (CLI11's codes),
// which --help does not list; they are invalid options: 1.
TEST(VaectlCliTest, RegressionAUsageErrorExits1) {
  EXPECT_EQ(Vaectl("--connect-timeout-ms 0 status").exit_code, 1);
  EXPECT_EQ(Vaectl("--no-such-flag status").exit_code, 1);
  EXPECT_EQ(Vaectl("decode /nonexistent/latent.safetensors").exit_code, 1);
  EXPECT_EQ(Vaectl("--help").exit_code, 0);
}

// Regression: --audio-out on a decode without an audio
// latent exited 0 and wrote nothing, without a word.
TEST(VaectlCliTest, RegressionAudioOutWithoutAnAudioLatentIsRefused) {
  const auto r = Vaectl(
      "--socket /nonexistent/x.sock decode --random-latent 1,32,4,4 --format none "
      "--audio-out /tmp/never.wav");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("--audio-out /tmp/never.wav"));
  EXPECT_THAT(r.out, HasSubstr("no audio latent"));
  EXPECT_THAT(r.out, Not(HasSubstr("not running")));  // refused before connecting
}

TEST(VaectlCliTest, DecodeNeedsAVideoOrAudioLatent) {
  const auto r = Vaectl("--socket /nonexistent/x.sock decode --format none");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("no latent given"));
  EXPECT_THAT(r.out, HasSubstr("LATENT_FILE or --random-latent"));
  EXPECT_THAT(r.out, HasSubstr("--audio-latent FILE or --random-audio-latent"));
  EXPECT_THAT(r.out, Not(HasSubstr("not running")));  // refused before connecting
}

TEST(VaectlCliTest, AudioOnlyDecodeNeedsNoVideoLatent) {
  // Gets as far as connecting: the audio latent alone is a complete request.
  const auto r = Vaectl("--socket /nonexistent/x.sock decode --random-audio-latent 2,32,40");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("vaed is not running"));
}

TEST(VaectlCliTest, DecodeRejectsFrameRatesOutsideTheRange) {
  for (const char* fps : {"0", "-1", "inf", "nan", "5000"}) {
    const auto r = Vaectl("--socket /nonexistent/x.sock decode --random-latent 1,32,4,4 "
                          "--format none --fps " + std::string(fps));
    EXPECT_NE(r.exit_code, 0) << fps;
    EXPECT_THAT(r.out, HasSubstr("must be a frame rate in (0, 1000]")) << fps;
    EXPECT_THAT(r.out, Not(HasSubstr("not running"))) << fps;
  }
}

TEST(VaectlCliTest, DecodeRejectsUnknownWavFormat) {
  const auto r = Vaectl(
      "--socket /nonexistent/x.sock decode --random-audio-latent 1,32,4 "
      "--wav-format mp3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--wav-format"));
  EXPECT_THAT(r.out, HasSubstr("mp3"));
  EXPECT_THAT(r.out, Not(HasSubstr("not running")));
}

TEST(VaectlCliTest, DecodeRejectsUnknownProgressModeNamingTheFlag) {
  const auto r = Vaectl(
      "--socket /nonexistent/x.sock decode --random-latent 1,32,4,4 --format none "
      "--progress fancy");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--progress"));
  EXPECT_THAT(r.out, HasSubstr("fancy"));
  EXPECT_THAT(r.out, Not(HasSubstr("not running")));
}

TEST(VaectlCliTest, DecodeRejectsMalformedRandomAudioShape) {
  const auto r = Vaectl("--socket /nonexistent/x.sock decode --random-audio-latent 2,a,40");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("--random-audio-latent: shape '2,a,40': 'a' is not a positive "
                               "integer"));
  const auto zero = Vaectl("--socket /nonexistent/x.sock decode --random-audio-latent 2,32,0");
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_THAT(zero.out, Not(HasSubstr("not running")));
}

TEST(VaectlCliTest, DecodeRefusesAnAbsurdRandomAudioLatent) {
  const auto r = Vaectl(
      "--socket /nonexistent/x.sock decode --random-audio-latent "
      "2,32,100000000 --format none");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("--random-audio-latent 2,32,100000000 has 6400000000 elements"));
}

TEST(VaectlCliTest, DecodeRejectsAudioFileTogetherWithRandomAudio) {
  const auto r =
      Vaectl("decode --audio-latent " + std::string(VAECTL_PATH) + " --random-audio-latent 1,32,4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("excludes"));
}

TEST(VaectlCliTest, DecodeRejectsMissingAudioLatentFile) {
  const auto r = Vaectl("decode --audio-latent /nonexistent/audio.safetensors");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("/nonexistent/audio.safetensors"));
}

TEST(VaectlCliTest, DecodeHelpDescribesAudioOptions) {
  const auto r = Vaectl("decode --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--audio-latent", "--random-audio-latent", "--audio-key", "--audio-out",
                           "--wav-format", "--audio-reference-key", "--independent-lengths"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
}

TEST(VaectlCliTest, DecodeHelpDescribesGroupSize) {
  const auto r = Vaectl("decode --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--group-size"));
  EXPECT_THAT(r.out, HasSubstr("group.qualified_sizes"));
}

// Streamed output: --format mp4 streams by default; --no-stream is described and
// refused (before connecting) with a format it does not apply to.
TEST(VaectlCliTest, DecodeHelpDescribesStreamingAndNoStream) {
  const auto r = Vaectl("decode --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--no-stream"));
  EXPECT_THAT(r.out, HasSubstr("--deadline-ms"));
  EXPECT_THAT(r.out, HasSubstr("--format mp4 streams"));
}

TEST(VaectlCliTest, DecodeRefusesNoStreamWithoutMp4) {
  const auto r = Vaectl(
      "--socket /nonexistent/x.sock decode --random-latent 1,32,4,4 --format raw "
      "--no-stream");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("--no-stream applies to --format mp4"));
  EXPECT_THAT(r.out, Not(HasSubstr("not running")));
}

TEST(VaectlCliTest, DecodeRejectsANegativeGroupSize) {
  const auto r =
      Vaectl("--socket /nonexistent/x.sock decode --random-latent 1,32,4,4 --group-size -1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--group-size"));
  EXPECT_THAT(r.out, Not(HasSubstr("not running")));  // refused before connecting
}

TEST(VaectlCliTest, DecodeRejectsMalformedRandomShape) {
  const auto r = Vaectl("--socket /nonexistent/x.sock decode --random-latent 1,a,4");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("'a' is not a positive integer"));
}

TEST(VaectlCliTest, DecodeRejectsUnknownFormat) {
  const auto r = Vaectl("decode --random-latent 1,32,4,4 --format gif");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--format"));
}

TEST(VaectlCliTest, HelpListsSubcommandsAndExitCodes) {
  const auto r = Vaectl("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("status"));
  EXPECT_THAT(r.out, HasSubstr("decode"));
  EXPECT_THAT(r.out, HasSubstr("--socket"));
  EXPECT_THAT(r.out, HasSubstr("Exit status"));
}

TEST(VaectlCliTest, SubcommandIsRequired) {
  const auto r = Vaectl("");
  EXPECT_NE(r.exit_code, 0);
}

}  // namespace
