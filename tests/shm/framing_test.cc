// FrameReader / EncodeFrame: the control channel's message framing
// (vaed/framing.h).
#include "vaed/framing.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vaed::wire {
namespace {

std::vector<Frame> Drain(FrameReader& reader) {
  std::vector<Frame> frames;
  while (std::optional<Frame> f = reader.Next()) frames.push_back(std::move(*f));
  return frames;
}

// The frame of a payload within the limit.
std::string Framed(std::string_view payload) {
  Result<std::string> f = EncodeFrame(payload);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? *f : std::string();
}

TEST(FramingTest, APayloadOverTheLimitIsAnErrorNotAnException) {
  // A view of 2^32 bytes that is never read: only its size is checked.
  const std::string_view huge(reinterpret_cast<const char*>(&kFrameHeaderBytes),
                              size_t{kMaxFramePayloadBytes} + 1);
  Result<std::string> f = EncodeFrame(huge);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
}

TEST(FramingTest, HeaderIsLittleEndianLength) {
  const std::string f = Framed(std::string(0x0102, 'x'));
  ASSERT_EQ(f.size(), 4u + 0x0102);
  EXPECT_EQ(static_cast<unsigned char>(f[0]), 0x02);
  EXPECT_EQ(static_cast<unsigned char>(f[1]), 0x01);
  EXPECT_EQ(f[2], 0);
  EXPECT_EQ(f[3], 0);
  EXPECT_EQ(Framed(""), std::string(4, '\0'));
}

TEST(FramingTest, ReassemblesMessagesSplitAtEveryByte) {
  const std::string stream = Framed("hello") + Framed("") + Framed("world!");
  FrameReader reader(1024);
  std::vector<std::string> got;
  for (char c : stream) {
    reader.Append(std::string_view(&c, 1));
    for (Frame& f : Drain(reader)) {
      EXPECT_EQ(f.oversized_bytes, 0u);
      got.push_back(f.payload);
    }
  }
  EXPECT_EQ(got, (std::vector<std::string>{"hello", "", "world!"}));
  EXPECT_TRUE(reader.at_boundary());
}

TEST(FramingTest, ManyMessagesInOneChunk) {
  std::string stream;
  for (int i = 0; i < 100; ++i) stream += Framed(std::to_string(i));
  FrameReader reader(16);
  reader.Append(stream);
  std::vector<Frame> frames = Drain(reader);
  ASSERT_EQ(frames.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(frames[i].payload, std::to_string(i));
  EXPECT_EQ(reader.buffered_bytes(), 0u);
}

TEST(FramingTest, CapIsInclusive) {
  FrameReader reader(5);
  reader.Append(Framed("12345") + Framed("123456"));
  std::vector<Frame> frames = Drain(reader);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].payload, "12345");
  EXPECT_EQ(frames[0].oversized_bytes, 0u);
  EXPECT_EQ(frames[1].oversized_bytes, 6u);
  EXPECT_TRUE(frames[1].payload.empty());
}

// An oversized message is reported once its header is in, its payload is
// never held, and the message after it comes through intact.
TEST(FramingTest, OversizedPayloadIsSkippedUnbufferedAndTheNextMessageSurvives) {
  constexpr uint64_t kDeclared = 3ull << 30;  // 3 GiB announced
  FrameReader reader(1 << 20);
  std::string header(4, '\0');
  for (int i = 0; i < 4; ++i) header[i] = static_cast<char>((kDeclared >> (8 * i)) & 0xff);
  reader.Append(header);
  std::vector<Frame> first = Drain(reader);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].oversized_bytes, kDeclared);
  const std::string chunk(1 << 16, 'z');
  uint64_t sent = 0;
  while (sent + chunk.size() <= kDeclared) {
    reader.Append(chunk);
    sent += chunk.size();
    ASSERT_EQ(reader.buffered_bytes(), 0u) << "after " << sent << " bytes";
    ASSERT_FALSE(reader.Next().has_value());
  }
  // The rest of the payload and the next message in one chunk.
  reader.Append(std::string(kDeclared - sent, 'z') + Framed("next"));
  std::vector<Frame> rest = Drain(reader);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].payload, "next");
  EXPECT_TRUE(reader.at_boundary());
}

TEST(FramingTest, PartialMessageWaitsForItsBytes) {
  FrameReader reader(100);
  const std::string f = Framed("abcdef");
  reader.Append(f.substr(0, 7));
  EXPECT_FALSE(reader.Next().has_value());
  EXPECT_EQ(reader.buffered_bytes(), 7u);
  EXPECT_FALSE(reader.at_boundary());
  reader.Append(f.substr(7));
  std::optional<Frame> got = reader.Next();
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->payload, "abcdef");
}

}  // namespace
}  // namespace vaed::wire
