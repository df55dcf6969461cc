// Tests of the torch-free safetensors reader (daemon/models/safetensors.h)
// and Sha256File (daemon/models/sha256.h).
#include "daemon/models/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "daemon/models/sha256.h"
#include "safetensors_test_util.h"

namespace vaed {
namespace {

using test_util::SafetensorsBytes;
using test_util::SharedDataPath;
using test_util::TempDir;
using test_util::TestTensor;
using ::testing::HasSubstr;

// Bytes of `n` floats 0, 1, 2, ...
std::string FloatBytes(int n) {
  std::string s(static_cast<size_t>(n) * 4, '\0');
  for (int i = 0; i < n; ++i) {
    const float v = static_cast<float>(i);
    std::memcpy(s.data() + 4 * i, &v, 4);
  }
  return s;
}

Status OpenStatus(const std::string& path) {
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  return f.ok() ? Status::Ok() : f.status();
}

class SafetensorsTest : public ::testing::Test {
 protected:
  // Writes a file with the given raw header and data and returns Open()'s
  // status.
  Status OpenRaw(const std::string& header, const std::string& data) {
    return OpenStatus(dir_.Write("t.safetensors", SafetensorsBytes(header, data)));
  }
  TempDir dir_;
};

TEST_F(SafetensorsTest, OpenAcceptsValidFileAndExposesTensorsAndMetadata) {
  // Keys deliberately not in buffer order; one zero-size tensor.
  const std::string header = R"({"__metadata__":{"source":"unit test"},)"
                             R"("b":{"dtype":"U8","shape":[2],"data_offsets":[24,26]},)"
                             R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                             R"("empty":{"dtype":"F16","shape":[0,4],"data_offsets":[26,26]}})";
  const std::string data = FloatBytes(6) + std::string("\x07\x09", 2);
  const std::string path = dir_.Write("ok.safetensors", SafetensorsBytes(header, data));

  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->path(), path);
  EXPECT_EQ((*f)->names(), (std::vector<std::string>{"a", "b", "empty"}));
  EXPECT_EQ((*f)->metadata().at("source"), "unit test");

  const TensorEntry* a = (*f)->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kFloat32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->nbytes, 24u);
  float last = 0;
  std::memcpy(&last, a->data + 20, 4);
  EXPECT_EQ(last, 5.0f);

  const TensorEntry* b = (*f)->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kUInt8);
  EXPECT_EQ(b->data[0], 7);
  EXPECT_EQ(b->data[1], 9);

  const TensorEntry* empty = (*f)->Find("empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->nbytes, 0u);
  EXPECT_EQ((*f)->Find("missing"), nullptr);
}

TEST_F(SafetensorsTest, OpenAcceptsFileWrittenByHelperWithPaddedHeader) {
  const std::string path =
      dir_.Write("ok.safetensors", SafetensorsBytes({{"x", "BF16", {3}, std::string(6, '\1')}}));
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->size(), 1u);
  EXPECT_TRUE((*f)->metadata().empty());
}

TEST_F(SafetensorsTest, OpenReportsMissingFileAsNotFound) {
  Status s = OpenStatus(dir_.path() + "/does_not_exist.safetensors");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("does_not_exist.safetensors"));
}

TEST_F(SafetensorsTest, OpenRejectsFileShorterThanLengthPrefix) {
  Status s = OpenStatus(dir_.Write("short.safetensors", std::string("\x02\x00\x00", 3)));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("too short for the 8-byte header length"));
}

TEST_F(SafetensorsTest, OpenRejectsTruncatedHeader) {
  // The length prefix matches the bytes present, but the JSON is cut off.
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[1],"data_of)", "");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("header is not valid JSON"));
}

TEST_F(SafetensorsTest, OpenRejectsHeaderLengthPastEndOfFile) {
  std::string bytes = SafetensorsBytes({{"a", "F32", {1}, FloatBytes(1)}});
  bytes[0] = static_cast<char>(0xff);  // header length now 255+: past the end
  bytes[1] = static_cast<char>(0x10);
  Status s = OpenStatus(dir_.Write("t.safetensors", bytes));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("runs past the end of the file"));
}

TEST_F(SafetensorsTest, OpenRejectsHugeHeaderLengthWithoutOverflow) {
  std::string bytes(16, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(0xff);
  Status s = OpenStatus(dir_.Write("t.safetensors", bytes));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("runs past the end of the file"));
}

TEST_F(SafetensorsTest, OpenRejectsHeaderThatIsNotAnObject) {
  Status s = OpenRaw("[1, 2, 3]", "");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("expected an object"));
}

TEST_F(SafetensorsTest, OpenRejectsGapBetweenTensors) {
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                     FloatBytes(3));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("gap in the data buffer: bytes [4, 8)"));
  EXPECT_THAT(s.message(), HasSubstr("'b'"));
}

TEST_F(SafetensorsTest, OpenRejectsGapAtStartOfBuffer) {
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", FloatBytes(2));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("gap in the data buffer: bytes [0, 4)"));
}

TEST_F(SafetensorsTest, OpenRejectsOverlappingTensors) {
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                     FloatBytes(3));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'b' data [4, 12) overlaps tensor 'a' data [0, 8)"));
}

TEST_F(SafetensorsTest, OpenRejectsTwoTensorsSharingTheSameBytes) {
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                     FloatBytes(1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("overlaps"));
}

TEST_F(SafetensorsTest, OpenRejectsTrailingBytes) {
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", FloatBytes(2));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("4 trailing bytes"));
}

TEST_F(SafetensorsTest, OpenRejectsOffsetsPastDataBuffer) {
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", FloatBytes(1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'a' data_offsets [0, 8) run past the end of the data "
                                     "buffer (4 bytes)"));
}

TEST_F(SafetensorsTest, OpenRejectsUnknownDtypeNamingTensor) {
  Status s =
      OpenRaw(R"({"weird":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", FloatBytes(2));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'weird'"));
  EXPECT_THAT(s.message(), HasSubstr("dtype 'F64' is not supported"));
}

TEST_F(SafetensorsTest, OpenRejectsByteSizeThatDisagreesWithShape) {
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", FloatBytes(2));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'a' spans 8 bytes but dtype F32 shape [3] needs 12"));
}

TEST_F(SafetensorsTest, OpenRejectsNegativeDim) {
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", FloatBytes(1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'a' shape[0] is -1"));
}

TEST_F(SafetensorsTest, OpenRejectsEntryMissingField) {
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[1]}})", "");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'a' has no 'data_offsets' field"));
}

TEST_F(SafetensorsTest, OpenRejectsEntryWithUnknownField) {
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"stride":[1]}})",
                     FloatBytes(1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("unknown field 'stride'"));
}

TEST_F(SafetensorsTest, OpenRejectsOffsetsWithBeginAfterEnd) {
  Status s = OpenRaw(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", FloatBytes(1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("begin > end"));
}

TEST_F(SafetensorsTest, OpenRejectsDuplicateTensorNames) {
  Status s = OpenRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                     FloatBytes(2));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("duplicate key 'a'"));
}

TEST_F(SafetensorsTest, OpenRejectsNonStringMetadataValue) {
  Status s = OpenRaw(R"({"__metadata__":{"n":3}})", "");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("__metadata__['n'] is 3; expected a string"));
}

TEST_F(SafetensorsTest, ErrorsStartWithThePath) {
  const std::string path = dir_.Write("named.safetensors", SafetensorsBytes("{}", "xx"));
  Status s = OpenStatus(path);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind(path + ": ", 0), 0u) << s.message();
}

TEST_F(SafetensorsTest, RequireReportsMissingTensorAsNotFound) {
  const std::string path =
      dir_.Write("w.safetensors", SafetensorsBytes({{"a", "F32", {1}, FloatBytes(1)}}));
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Result<const TensorEntry*> e = (*f)->Require("3.pool.0.weight", DType::kFloat16, {1});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(e.status().message(), "w.safetensors: tensor '3.pool.0.weight' is missing");
}

TEST_F(SafetensorsTest, RequireReportsWrongShapeNamingBothShapes) {
  const std::string path = dir_.Write(
      "w.safetensors", SafetensorsBytes({{"3.pool.0.weight", "F32", {2, 1, 1, 1}, FloatBytes(2)}}));
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Result<const TensorEntry*> e = (*f)->Require("3.pool.0.weight", DType::kFloat32, {1, 2, 1, 1});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.status().message(),
            "w.safetensors: tensor '3.pool.0.weight' has shape [2, 1, 1, 1], expected "
            "[1, 2, 1, 1]");
}

TEST_F(SafetensorsTest, RequireReportsWrongDtype) {
  const std::string path =
      dir_.Write("w.safetensors", SafetensorsBytes({{"a", "F32", {1}, FloatBytes(1)}}));
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Result<const TensorEntry*> e = (*f)->Require("a", DType::kFloat16, {1});
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().message(), "w.safetensors: tensor 'a' has dtype float32, expected float16");
  Result<const TensorEntry*> ok = (*f)->Require("a", DType::kFloat32, {1});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)->name, "a");
}

TEST_F(SafetensorsTest, MoveTransfersTheMapping) {
  const std::string path =
      dir_.Write("w.safetensors", SafetensorsBytes({{"a", "F32", {2}, FloatBytes(2)}}));
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const uint8_t* data = (*f)->Find("a")->data;
  SafetensorsFile moved(std::move(**f));
  EXPECT_EQ((*f)->size(), 0u);
  EXPECT_EQ((*f)->Find("a"), nullptr);
  ASSERT_NE(moved.Find("a"), nullptr);
  EXPECT_EQ(moved.Find("a")->data, data);  // same mapping, still valid
  float v = 0;
  std::memcpy(&v, data + 4, 4);
  EXPECT_EQ(v, 1.0f);
}

TEST(SafetensorsRealDataTest, ReadsTaef2DecoderWeights) {
  const std::string path = SharedDataPath("taef2_decoder.safetensors");
  if (!test_util::Exists(path)) GTEST_SKIP() << "shared data absent: " << path;
  Result<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ((*f)->size(), 79u);
  EXPECT_EQ((*f)->file_bytes(), 2683926u);
  uint64_t params = 0;
  for (const std::string& name : (*f)->names()) {
    const TensorEntry* e = (*f)->Find(name);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->dtype, DType::kFloat16) << name;
    params += e->nbytes / 2;
  }
  EXPECT_EQ(params, 1338499u);  // README §2
  Result<const TensorEntry*> e = (*f)->Require("3.pool.0.weight", DType::kFloat16, {256, 64, 1, 1});
  EXPECT_TRUE(e.ok()) << e.status().ToString();
}

TEST(Sha256Test, MatchesReadmeChecksumOfDecoderWeights) {
  const std::string path = SharedDataPath("taef2_decoder.safetensors");
  if (!test_util::Exists(path)) GTEST_SKIP() << "shared data absent: " << path;
  Result<std::string> sha = Sha256File(path);
  ASSERT_TRUE(sha.ok()) << sha.status().ToString();
  EXPECT_EQ(*sha, "89f5078dc26a2dd6b6ce5d18ef0cee482bb81c56ff56c417185f1699defd2138");
}

TEST(Sha256Test, EmptyFileGivesWellKnownDigest) {
  TempDir dir;
  Result<std::string> sha = Sha256File(dir.Write("empty", ""));
  ASSERT_TRUE(sha.ok()) << sha.status().ToString();
  EXPECT_EQ(*sha, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Result<std::string> abc = Sha256File(dir.Write("abc", "abc"));
  ASSERT_TRUE(abc.ok()) << abc.status().ToString();
  EXPECT_EQ(*abc, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, MissingFileIsNotFound) {
  Result<std::string> sha = Sha256File("/nonexistent/vaed/weights.safetensors");
  ASSERT_FALSE(sha.ok());
  EXPECT_EQ(sha.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(sha.status().message(), HasSubstr("/nonexistent/vaed/weights.safetensors"));
}

}  // namespace
}  // namespace vaed
