// Device UUIDs (vaed/device_uuid.h): the one way vaed names a GPU.
#include "vaed/device_uuid.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace vaed {
namespace {

constexpr char kCanonical[] = "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf";

TEST(DeviceUuidTest, ParsesEveryFormToolsPrintAndFormatsCanonically) {
  for (const char* text :
       {kCanonical, "GPU-A0A1A2A3-A4A5-A6A7-A8A9-AAABACADAEAF", "a0a1a2a3a4a5a6a7a8a9aaabacadaeaf",
        "MIG-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf", "gpu-a0a1a2a3a4a5a6a7-a8a9aaabacadaeaf"}) {
    auto r = ParseDeviceUuid(text, "f");
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    EXPECT_EQ(FormatDeviceUuid(*r), kCanonical) << text;
    EXPECT_EQ(r->bytes[0], 0xa0);
    EXPECT_EQ(r->bytes[15], 0xaf);
  }
}

TEST(DeviceUuidTest, RefusesOtherShapesNamingTheFieldAndTheRule) {
  for (const char* text : {"", "GPU-", "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadae",   // 30 digits
                           "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf0",            // 33 digits
                           "GPU-g0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf", "0", "cuda:0",
                           "GPU-a0a1a2a3 a4a5-a6a7-a8a9-aaabacadaeaf"}) {
    auto r = ParseDeviceUuid(text, "executor.devices[1]");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), "executor.devices[1]");
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("32 hex digits"));
  }
}

TEST(DeviceUuidTest, OrderIsTheOrderOfTheTextForm) {
  std::vector<DeviceUuid> uuids;
  for (const char* text : {"GPU-ff000000-0000-0000-0000-000000000000",
                           "GPU-00000000-0000-0000-0000-000000000001",
                           "GPU-0a000000-0000-0000-0000-000000000000"}) {
    uuids.push_back(*ParseDeviceUuid(text, "f"));
  }
  std::sort(uuids.begin(), uuids.end());
  EXPECT_EQ(FormatDeviceUuid(uuids[0]), "GPU-00000000-0000-0000-0000-000000000001");
  EXPECT_EQ(FormatDeviceUuid(uuids[1]), "GPU-0a000000-0000-0000-0000-000000000000");
  EXPECT_EQ(FormatDeviceUuid(uuids[2]), "GPU-ff000000-0000-0000-0000-000000000000");
  EXPECT_EQ(uuids[0], *ParseDeviceUuid("00000000000000000000000000000001", "f"));
}

}  // namespace
}  // namespace vaed
