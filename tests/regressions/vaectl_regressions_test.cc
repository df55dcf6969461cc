// Regression tests of bugs found and fixed in vaectl and the ops helpers
// it runs (ops/vaectl/, ops/common/). Each test names its bug, the commit
// that fixed it and what failed before; tests/regressions/README.md lists
// them all. No daemon: vaectl is run against a socket that does not exist.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ops/common/frame_writer.h"
#include "ops/vaectl/decode_report.h"
#include "ops/vaectl/output_plan.h"
#include "tests/common/test_paths.h"
#include "tests/ops/test_util.h"

namespace vaed {
namespace {

using ops_test::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// Runs the built vaectl; stdout and stderr together.
ops_test::CommandResult Vaectl(const std::string& args) {
  return ops_test::RunCommand(std::string(VAECTL_PATH) + " " + args + " 2>&1");
}

// Bug: `vaectl decode --audio-out` or `--out` naming the latent file itself
// (or a link to it) overwrote the input while it was still mapped, and
// vaectl died with SIGBUS. Fixed in 840798b (review fixes):
// CheckOutputsAvoidInputs refuses such an output before decoding.
// Before: no check; the decode crashed. (Was
// CheckOutputsAvoidInputsTest.RefusesAnOutputThatIsAnInput.)
TEST(RegressionTest, VaectlRefusesAnOutputThatIsTheLatentFileInsteadOfSigbus) {
  TempDir dir;
  const std::string in = dir / "in.safetensors";
  { std::ofstream(in) << "x"; }
  const std::string link = dir / "link.safetensors";
  std::filesystem::create_symlink(in, link);
  vaectl::OutputPlan plan;
  plan.kind = vaectl::OutputKind::kMp4;
  plan.path = dir / "out.mp4";
  plan.wav = in;
  Status s = vaectl::CheckOutputsAvoidInputs(plan, {in});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("output " + in + " is the input file " + in));
  plan.wav = dir / "out.wav";
  plan.path = link;  // another name for the same file
  EXPECT_FALSE(vaectl::CheckOutputsAvoidInputs(plan, {in}).ok());
  plan.path = dir / "out.mp4";
  EXPECT_TRUE(vaectl::CheckOutputsAvoidInputs(plan, {in}).ok());
  EXPECT_TRUE(vaectl::CheckOutputsAvoidInputs(plan, {}).ok());
}

// Bug: a child (ffmpeg) that exits without reading all of its stdin must
// not kill the calling process (vaectl) with SIGPIPE. Fixed where
// RunWithStdin was written, in 1c64c67 (a socketpair written with
// send(MSG_NOSIGNAL) instead of a pipe, so the early exit is EPIPE). Before:
// writing to a pipe whose reader had exited raised a process-wide SIGPIPE.
// (Was RunWithStdinTest.ChildExitingEarlyIsAnErrorNotSigpipe.)
TEST(RegressionTest, ChildExitingEarlyIsAnErrorNotSigpipe) {
  std::vector<uint8_t> input(16 * 1024 * 1024);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint8_t>((i * 37 + i / 7) & 0xff);
  Status s = ops::RunWithStdin({"/bin/true"}, input);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("stdin"));
}

// Bug: a huge `--random-latent` (here 4096 x 32 x 1024 x 1024 values)
// aborted vaectl with std::bad_alloc. Fixed in 4cd5c60: the shape's element
// count is bounded before anything is allocated. Before: an uncaught
// exception and abort. (Was
// VaectlCliTest.DecodeRefusesAnAbsurdRandomLatentWithoutCrashing.)
TEST(RegressionTest, VaectlRefusesAnAbsurdRandomLatentWithoutCrashing) {
  const auto r = Vaectl("--socket /nonexistent/x.sock decode --random-latent 4096,32,1024,1024 "
                        "--format none");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("at most 268435456"));
}

// Bug: an audio-only decode silently dropped the video output flags it
// cannot honour (--format mp4/raw, --out). Fixed in 840798b (review
// fixes): refused before connecting, naming the flag. Before: accepted, and
// nothing was written where the user asked. (Was
// VaectlCliTest.AudioOnlyDecodeRefusesVideoOutputFlags.) `--format none
// --audio-out F` was refused too; now it writes only the WAV
// (VaectlFormatNoneWithAudioOutIsAccepted below).
TEST(RegressionTest, VaectlAudioOnlyDecodeRefusesVideoOutputFlags) {
  for (const std::string flags :
       {"--format mp4", "--format raw", "--out /tmp/x/foo.mp4", "--format none --out a.png"}) {
    const auto r =
        Vaectl("--socket /nonexistent/x.sock decode --random-audio-latent 1,32,4 " + flags);
    EXPECT_EQ(r.exit_code, 1) << flags;
    EXPECT_THAT(r.out, HasSubstr("this decode has no video latent")) << flags;
    EXPECT_THAT(r.out, Not(HasSubstr("not running"))) << flags;
  }
}

// Bug: `vaectl decode --format none --audio-out F`
// was refused ("--format none writes no files"), so there was no way to
// write only the WAV of a decode. Now the flags pass the check and the
// command gets as far as connecting (the daemon suite writes the WAV:
// VaectlH3DaemonTest.FormatNoneWithAudioOutWritesOnlyTheWav).
TEST(RegressionTest, VaectlFormatNoneWithAudioOutIsAccepted) {
  for (const std::string latent : {"--random-audio-latent 1,32,4",
                                   "--random-latent 1,32,4,4 --random-audio-latent 1,32,4"}) {
    const auto r = Vaectl("--socket /nonexistent/x.sock decode " + latent +
                          " --format none --audio-out a.wav");
    EXPECT_EQ(r.exit_code, 2) << latent << ": " << r.out;
    EXPECT_THAT(r.out, HasSubstr("vaed is not running")) << latent;
  }
}

}  // namespace
}  // namespace vaed
