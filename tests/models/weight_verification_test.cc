// Tests of weight verification (daemon/models/weight_verification.h): the
// SHA256SUMS reader, the per-file digest cache, and VerifyWeights' states
// and mismatch errors; and that the registry refuses a mismatching model
// before loading it.
#include "daemon/models/weight_verification.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "daemon/models/h3/video_config.h"
#include "daemon/models/model_registry.h"
#include "daemon/models/sha256.h"
#include "safetensors_test_util.h"

namespace vaed::models {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using test_util::TempDir;

// sha256("abc"), FIPS 180-2 appendix B.1.
constexpr char kAbc[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
constexpr char kZeros[] = "0000000000000000000000000000000000000000000000000000000000000000";

ModelConfig Taef2At(const std::string& path) {
  ModelConfig c;
  c.name = "t";
  c.kind = models::ModelKind::kTaef2;
  c.weights_path = path;
  return c;
}

TEST(ListedSha256Test, ReadsTheSha256sumFormatBothModes) {
  TempDir dir;
  const std::string sums = dir.Write("SHA256SUMS", std::string(kAbc) + "  a.safetensors\n" +
                                                       kZeros + " *b.safetensors\r\n\n");
  Result<std::optional<std::string>> a = ListedSha256(sums, "a.safetensors");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->value_or(""), kAbc);
  Result<std::optional<std::string>> b = ListedSha256(sums, "b.safetensors");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->value_or(""), kZeros);
  Result<std::optional<std::string>> c = ListedSha256(sums, "c.safetensors");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
}

TEST(ListedSha256Test, AnAbsentFileListsNothing) {
  TempDir dir;
  Result<std::optional<std::string>> r = ListedSha256(dir.path() + "/SHA256SUMS", "a");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
}

TEST(ListedSha256Test, AMalformedLineIsRefusedNamingFileAndLine) {
  TempDir dir;
  const std::string sums =
      dir.Write("SHA256SUMS", std::string(kAbc) + "  a\nnot a digest  b\n");
  Result<std::optional<std::string>> r = ListedSha256(sums, "b");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(sums + " line 2"));
}

// Regression: a file listed twice with different digests
// was verified by the first line (sha256sum -c fails either way), and a
// "./name" line did not count as listing it.
TEST(ListedSha256Test, RegressionConflictingLinesAreRefusedAndDotSlashNamesCount) {
  TempDir dir;
  const std::string sums = dir.Write("SHA256SUMS", std::string(kAbc) + "  w\n" + kZeros +
                                                       "  ./w\n" + kAbc + "  ./x\n");
  Result<std::optional<std::string>> w = ListedSha256(sums, "w");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(w.status().message(), HasSubstr("lists w twice with different digests (lines 1 and 2)"));
  Result<std::optional<std::string>> x = ListedSha256(sums, "x");
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(x->value_or(""), kAbc);
}

TEST(WeightFileSha256Test, HashesAgainWhenTheFileChanges) {
  TempDir dir;
  const std::string path = dir.Write("w.safetensors", "abc");
  Result<std::string> first = WeightFileSha256(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, kAbc);
  dir.Write("w.safetensors", "abcd");  // another size: another file version
  Result<std::string> second = WeightFileSha256(path);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, *Sha256File(path));
  EXPECT_NE(*second, kAbc);
}

TEST(VerifyWeightsTest, NoExpectedDigestIsUnverified) {
  TempDir dir;
  Result<WeightsVerification> v = VerifyWeights(Taef2At(dir.Write("w.safetensors", "abc")), 0);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->state, kWeightsUnverified);
  ASSERT_EQ(v->files.size(), 1u);
  EXPECT_EQ(v->files[0].key, "models.entry[0].weights");
  EXPECT_TRUE(v->files[0].sources.empty());
}

TEST(VerifyWeightsTest, ASha256sumsEntryBesideTheFileVerifiesIt) {
  TempDir dir;
  const std::string w = dir.Write("w.safetensors", "abc");
  const std::string sums = dir.Write("SHA256SUMS", std::string(kAbc) + "  w.safetensors\n");
  Result<WeightsVerification> v = VerifyWeights(Taef2At(w), 3);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->state, kWeightsVerified);
  ASSERT_EQ(v->files.size(), 1u);
  EXPECT_THAT(v->files[0].sources, ElementsAre(sums));
  EXPECT_EQ(v->files[0].sha256, kAbc);
}

TEST(VerifyWeightsTest, TheConfigKeyVerifiesInEitherCase) {
  TempDir dir;
  ModelConfig c = Taef2At(dir.Write("w.safetensors", "abc"));
  c.weights_sha256 = "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
  Result<WeightsVerification> v = VerifyWeights(c, 0);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->state, kWeightsVerified);
  EXPECT_THAT(v->files[0].sources, ElementsAre("models.entry[0].weights_sha256"));
}

TEST(VerifyWeightsTest, AMismatchNamesModelFileExpectedSourceAndActual) {
  TempDir dir;
  const std::string w = dir.Write("w.safetensors", "abc");
  const std::string sums = dir.Write("SHA256SUMS", std::string(kZeros) + "  w.safetensors\n");
  Result<WeightsVerification> v = VerifyWeights(Taef2At(w), 1);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(v.status().message(),
            "model 't': models.entry[1].weights file " + w + " has SHA-256 " + kAbc + ", but " +
                sums + " expects " + kZeros +
                "; refusing to load it (a corrupted or different weights file)");
}

TEST(VerifyWeightsTest, TheKeyAndSha256sumsMustBothMatch) {
  TempDir dir;
  ModelConfig c = Taef2At(dir.Write("w.safetensors", "abc"));
  dir.Write("SHA256SUMS", std::string(kAbc) + "  w.safetensors\n");
  c.weights_sha256 = kZeros;
  Result<WeightsVerification> v = VerifyWeights(c, 0);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("models.entry[0].weights_sha256 expects"));
}

TEST(VerifyWeightsTest, GeneratedWeightsHaveNoFiles) {
  ModelConfig c;
  c.name = "d";
  c.kind = models::ModelKind::kDemo;
  Result<WeightsVerification> v = VerifyWeights(c, 0);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->state, kWeightsGenerated);
  EXPECT_TRUE(v->files.empty());
}

// One rule for what a sharded index is, for the loader, the verification
// and the config check alike.
TEST(VerifyWeightsTest, IsShardedIndexIsTheIndexJsonSuffix) {
  EXPECT_TRUE(h3::IsShardedIndex("/w/model.safetensors.index.json"));
  EXPECT_TRUE(h3::IsShardedIndex(".index.json"));
  EXPECT_FALSE(h3::IsShardedIndex("/w/model.safetensors"));
  EXPECT_FALSE(h3::IsShardedIndex("/w/index.json"));
  EXPECT_FALSE(h3::IsShardedIndex("/w/model.index.json.bak"));
  EXPECT_FALSE(h3::IsShardedIndex(""));
}

TEST(VerifyWeightsTest, AShardedIndexChecksTheIndexAndEveryShard) {
  TempDir dir;
  const std::string index = dir.Write(
      "model.safetensors.index.json",
      R"({"metadata": {}, "weight_map": {"a.weight": "s1.safetensors", "b.weight": "s2.safetensors"}})");
  dir.Write("s1.safetensors", "abc");
  const std::string s2 = dir.Write("s2.safetensors", "abcd");
  const std::string index_sha = *Sha256File(index);
  ModelConfig c;
  c.name = "h";
  c.kind = models::ModelKind::kH3Video;
  c.weights_path = index;
  // The index and s1 listed, s2 not: unverified, naming s2.
  dir.Write("SHA256SUMS", index_sha + "  model.safetensors.index.json\n" + kAbc +
                              "  s1.safetensors\n");
  Result<WeightsVerification> v = VerifyWeights(c, 0);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->state, kWeightsUnverified);
  ASSERT_EQ(v->files.size(), 3u);
  EXPECT_EQ(v->files[2].path, s2);
  EXPECT_TRUE(v->files[2].sources.empty());
  // s2 listed with a wrong digest: refused, naming the shard.
  dir.Write("SHA256SUMS", index_sha + "  model.safetensors.index.json\n" + kAbc +
                              "  s1.safetensors\n" + kZeros + "  s2.safetensors\n");
  v = VerifyWeights(c, 0);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("file " + s2 + " has SHA-256"));
}

// A corrupted weights file must be refused by its digest, before the loader
// reads it: the file here is not even safetensors, so a loader that ran
// first would report a parse error instead.
TEST(WeightVerificationRegistryTest, RegressionAMismatchIsRefusedBeforeTheModelIsLoaded) {
  TempDir dir;
  const std::string w = dir.Write("taef2_decoder.safetensors", "corrupted bytes");
  dir.Write("SHA256SUMS", std::string(kAbc) + "  taef2_decoder.safetensors\n");
  ModelConfig c = Taef2At(w);
  Result<std::unique_ptr<ModelRegistry>> r = ModelRegistry::Create({c}, "t");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("expects " + std::string(kAbc)));
}

TEST(WeightVerificationRegistryTest, TheRegistryKeepsEachModelsState) {
  const std::string weights = test_util::SharedDataPath("taef2_decoder.safetensors");
  if (!test_util::Exists(weights)) GTEST_SKIP() << "shared data absent: " << weights;
  ModelConfig real = Taef2At(weights);  // ../shared/data/taef2/SHA256SUMS lists it
  ModelConfig demo;
  demo.name = "d";
  demo.kind = models::ModelKind::kDemo;
  Result<std::unique_ptr<ModelRegistry>> r = ModelRegistry::Create({real, demo}, "t");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_NE((*r)->weights_verification("t"), nullptr);
  EXPECT_EQ((*r)->weights_verification("t")->state, kWeightsVerified);
  EXPECT_EQ((*r)->weights_verification("d")->state, kWeightsGenerated);
  EXPECT_EQ((*r)->weights_verification("x"), nullptr);
}

TEST(WeightVerificationRegistryTest, DigestKeysAreCheckedNamingTheKey) {
  ModelConfig c = Taef2At("/w/taef2_decoder.safetensors");
  c.weights_sha256 = "abc";
  Status s = ModelRegistry::Validate({c}, "t");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("models.entry[0].weights_sha256 is 'abc'; must be a SHA-256"));

  ModelConfig h;
  h.name = "h";
  h.kind = models::ModelKind::kH3;
  h.audio_weights_sha256 = kAbc;
  s = ModelRegistry::Validate({h}, "h");
  EXPECT_THAT(s.message(), HasSubstr("models.entry[0].audio_weights_sha256 is set but "
                                     "models.entry[0].audio_weights is empty"));

  ModelConfig t = Taef2At("/w/taef2_decoder.safetensors");
  t.audio_weights_sha256 = kAbc;
  s = ModelRegistry::Validate({t}, "t");
  EXPECT_THAT(s.message(), HasSubstr("models.entry[0].audio_weights_sha256 is set for model 't' "
                                     "of kind taef2, which takes no audio_weights file"));

  h.audio_weights_sha256.clear();
  h.weights_path = "/w/model.safetensors.index.json";
  h.weights_sha256 = kAbc;
  s = ModelRegistry::Validate({h}, "h");
  EXPECT_THAT(s.message(), HasSubstr("sharded checkpoint index"));
}

}  // namespace
}  // namespace vaed::models
