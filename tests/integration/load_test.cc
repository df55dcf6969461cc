// Acceptance (load): N concurrent clients x M decodes of the small
// demo model through one daemon. Every request gets exactly one reply
// (none lost, none duplicated: the daemon's served counter and each
// client's count agree), every output is byte-checked against a reference
// decode of the same latent, and the daemon's RSS after the run stays within
// 10% of its RSS after warm-up.
//
// Size: VAED_LOAD_CLIENTS (default 8) x VAED_LOAD_DECODES (default 200).
// The sanitizer pass (scripts/sanitize.sh) runs this test from an
// AddressSanitizer + UndefinedBehaviorSanitizer build, daemon included.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "tests/common/daemon_process.h"
#include "vaed/client.h"
#include "vaed/client_protocol.h"

using vaed::client::ClientProtocol;

namespace vaed {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

// VmRSS of `pid` in bytes (0 if unreadable).
uint64_t RssBytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// Two latents (float32 [1, 32, 4, 4]) that clients alternate between, so a
// reply delivered to the wrong request would show as wrong bytes.
constexpr int64_t kH = 4, kW = 4;
const std::vector<int64_t> kLatent = {1, 32, kH, kW};
const std::vector<int64_t> kOutput = {1, 8 * kH, 8 * kW, 3};
constexpr uint64_t kLatentBytes = 32 * kH * kW * 4;
constexpr uint64_t kOutputBytes = 64 * kH * kW * 3;

void FillLatent(int which, uint8_t* dst) {
  float* f = reinterpret_cast<float*>(dst);
  for (uint64_t i = 0; i < kLatentBytes / 4; ++i) {
    f[i] = std::sin(0.013f * float(i) + 1.7f * float(which));
  }
}

struct Worker {
  std::unique_ptr<client::Client> client;
  std::unique_ptr<client::SharedRegion> in[2], out;
  uint64_t in_id[2] = {0, 0}, out_id = 0;
};

Worker MakeWorker(const std::string& socket, const std::string& name) {
  Worker w;
  auto c = client::Client::Connect({.socket = socket, .client_name = name});
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return w;
  w.client = std::move(c).value();
  for (int k = 0; k < 2; ++k) {
    auto r = client::SharedRegion::Create(kLatentBytes);
    EXPECT_TRUE(r.ok());
    w.in[k] = std::move(r).value();
    FillLatent(k, w.in[k]->data());
    auto id = w.client->RegisterRegion(*w.in[k]);
    EXPECT_TRUE(id.ok());
    w.in_id[k] = id.ok() ? *id : 0;
  }
  auto out = client::SharedRegion::Create(kOutputBytes);
  EXPECT_TRUE(out.ok());
  w.out = std::move(out).value();
  auto id = w.client->RegisterRegion(*w.out);
  EXPECT_TRUE(id.ok());
  w.out_id = id.ok() ? *id : 0;
  return w;
}

Result<v1::DecodeReply> DecodeOne(Worker& w, int which) {
  return ClientProtocol::Decode(*w.client, {.model = "demo",
                                            .latent = {w.in_id[which], 0, DType::kFloat32, kLatent},
                                            .output = {w.out_id, 0, DType::kUInt8, kOutput}});
}

TEST(LoadTest, ConcurrentClientsGetEveryReplyOnceWithCorrectBytesAndStableRss) {
  const int clients = EnvInt("VAED_LOAD_CLIENTS", 8);
  const int decodes = EnvInt("VAED_LOAD_DECODES", 200);
  testing::DaemonProcess daemon({"--intra-op-threads", "1"});
  ASSERT_TRUE(daemon.ok()) << daemon.Log();

  // References: one decode of each latent.
  Worker ref = MakeWorker(daemon.socket(), "load-reference");
  ASSERT_NE(ref.client, nullptr);
  std::vector<uint8_t> expected[2];
  for (int k = 0; k < 2; ++k) {
    auto r = DecodeOne(ref, k);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    expected[k].assign(ref.out->data(), ref.out->data() + kOutputBytes);
  }
  ASSERT_NE(expected[0], expected[1]);

  std::vector<Worker> workers;
  for (int i = 0; i < clients; ++i) {
    workers.push_back(MakeWorker(daemon.socket(), "load-" + std::to_string(i)));
    ASSERT_NE(workers.back().client, nullptr);
  }
  // Warm-up: every client decodes a few times; then the RSS baseline.
  for (Worker& w : workers) {
    for (int k = 0; k < 4; ++k) ASSERT_TRUE(DecodeOne(w, k % 2).ok());
  }
  auto before = ClientProtocol::GetStatus(*ref.client);
  ASSERT_TRUE(before.ok());
  const uint64_t rss_warm = RssBytes(daemon.pid());
  ASSERT_GT(rss_warm, 0u);

  std::atomic<int> ok{0}, wrong_bytes{0}, failed{0};
  std::vector<std::string> first_error(static_cast<size_t>(clients));
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      Worker& w = workers[static_cast<size_t>(i)];
      for (int n = 0; n < decodes; ++n) {
        const int which = (n + i) % 2;
        auto r = DecodeOne(w, which);
        if (!r.ok()) {
          if (failed++ == 0 || first_error[size_t(i)].empty()) {
            first_error[size_t(i)] = r.status().ToString();
          }
          continue;
        }
        if (std::memcmp(w.out->data(), expected[which].data(), kOutputBytes) != 0) {
          ++wrong_bytes;
        } else {
          ++ok;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t rss_after = RssBytes(daemon.pid());
  auto after = ClientProtocol::GetStatus(*ref.client);
  ASSERT_TRUE(after.ok());

  const int total = clients * decodes;
  std::printf(
      "load: %d clients x %d decodes in %.2f s (%.0f decodes/s); daemon RSS %.1f MiB "
      "after warm-up, %.1f MiB after the run (ratio %.3f)\n",
      clients, decodes, seconds, total / seconds, rss_warm / 1048576.0, rss_after / 1048576.0,
      double(rss_after) / double(rss_warm));
  for (const std::string& e : first_error) EXPECT_TRUE(e.empty()) << e;
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong_bytes.load(), 0);
  EXPECT_EQ(ok.load(), total);
  // Exactly one reply per request: the daemon served exactly what the
  // clients received, and nothing else failed.
  EXPECT_EQ(after->requests_served() - before->requests_served(), uint64_t(total));
  EXPECT_EQ(after->requests_failed(), before->requests_failed());
  EXPECT_EQ(after->client_faults(), 0u);
  EXPECT_LE(double(rss_after), 1.10 * double(rss_warm));
  workers.clear();
  ref = Worker{};
  EXPECT_EQ(daemon.Terminate(), 0) << daemon.Log();
}

}  // namespace
}  // namespace vaed
