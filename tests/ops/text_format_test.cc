#include "ops/common/text_format.h"

#include <gtest/gtest.h>

#include <limits>

namespace vaed::ops {
namespace {

TEST(HumanBytesTest, SmallCountsStayInBytes) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
}

TEST(HumanBytesTest, UsesBinaryUnitsWithOneDecimal) {
  EXPECT_EQ(HumanBytes(1024), "1.0 KiB");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(5353996), "5.1 MiB");
  EXPECT_EQ(HumanBytes(uint64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(HumanBytes(uint64_t{1} << 40), "1.0 TiB");
}

TEST(HumanBytesTest, LargestValueUsesExbibytes) {
  EXPECT_EQ(HumanBytes(std::numeric_limits<uint64_t>::max()), "16.0 EiB");
}

TEST(HumanDurationTest, PicksUnitByMagnitude) {
  EXPECT_EQ(HumanDuration(0.000850), "850 us");
  EXPECT_EQ(HumanDuration(0.0125), "12.5 ms");
  EXPECT_EQ(HumanDuration(3.421), "3.42 s");
  EXPECT_EQ(HumanDuration(307), "5m 07s");
  EXPECT_EQ(HumanDuration(3 * 3600 + 12 * 60 + 59), "3h 12m");
  EXPECT_EQ(HumanDuration(2 * 86400 + 4 * 3600 + 30), "2d 04h");
}

TEST(HumanDurationTest, RejectsNegativeAndNonFinite) {
  EXPECT_EQ(HumanDuration(-1), "-");
  EXPECT_EQ(HumanDuration(std::numeric_limits<double>::infinity()), "-");
  EXPECT_EQ(HumanDuration(std::numeric_limits<double>::quiet_NaN()), "-");
}

TEST(FormatFixedTest, FormatsDecimalsAndNonFinite) {
  EXPECT_EQ(FormatFixed(37.8996, 2), "37.90");
  EXPECT_EQ(FormatFixed(0.48, 4), "0.4800");
  EXPECT_EQ(FormatFixed(std::numeric_limits<double>::infinity(), 2), "inf");
  EXPECT_EQ(FormatFixed(-std::numeric_limits<double>::infinity(), 2), "-inf");
  EXPECT_EQ(FormatFixed(std::numeric_limits<double>::quiet_NaN(), 2), "nan");
}

TEST(TextTableTest, PadsColumnsAndRightAlignsNumbers) {
  TextTable t({"component", "seconds", "ms"}, {false, true, true});
  t.AddRow({"decode", "7.6543", "7654.3"});
  t.AddRow({"taef2.decode_latent", "7.1", "7100.0"});
  EXPECT_EQ(t.Render(),
            "component            seconds      ms\n"
            "------------------------------------\n"
            "decode                7.6543  7654.3\n"
            "taef2.decode_latent      7.1  7100.0\n");
}

TEST(TextTableTest, ShortRowsArePaddedWithoutTrailingSpaces) {
  TextTable t({"a", "b"});
  t.AddRow({"long cell"});
  EXPECT_EQ(t.Render(), "a          b\n------------\nlong cell\n");
}

TEST(TextTableTest, EmptyHeaderRendersNoHeaderOrRule) {
  TextTable t(std::vector<std::string>{});
  t.AddRow({"socket", "/run/vaed/vaed.sock"});
  t.AddRow({"clients", "2"});
  EXPECT_EQ(t.Render(), "socket   /run/vaed/vaed.sock\nclients  2\n");
}

TEST(JoinTest, PutsTheSeparatorBetweenItemsOnly) {
  EXPECT_EQ(Join({}, ", "), "");
  EXPECT_EQ(Join({"a"}, ", "), "a");
  EXPECT_EQ(Join({"a", "b", "c"}, ", "), "a, b, c");
  EXPECT_EQ(Join({"1", "24", "7"}, "x"), "1x24x7");
}

}  // namespace
}  // namespace vaed::ops
