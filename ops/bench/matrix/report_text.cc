#include "ops/bench/matrix/report_text.h"

#include <algorithm>
#include <functional>

#include "ops/common/sample_stats.h"
#include "ops/common/text_format.h"
#include "vaed/tensor_ref.h"

namespace vaed::bench {
namespace {

using ops::FormatFixed;
using ops::Median;

std::string FormatSpeedup(double v) {
  return "x" + FormatFixed(v, 2) + (v >= 1.0 ? " faster" : " (slower)");
}

std::string OrDash(const std::optional<double>& v, int decimals) {
  return v ? FormatFixed(*v, decimals) : "-";
}

std::string BytesVerdict(const MatrixOptions& o, const ModeResult& m) {
  if (m.runs_compared == 0) {
    return IsReference(o, m) && m.first_request_s ? "reference" : "not compared";
  }
  if (m.max_bytes_differing == 0) {
    return IsReference(o, m) ? "reference (repeatable)" : "identical to " + ReferenceName(o);
  }
  return std::to_string(m.max_bytes_differing) + " bytes differ from " + ReferenceName(o);
}

// "a/b/c" over the group's positions (output rank first).
std::string PerRank(const ModeResult& m, const std::function<std::string(const RankStats&)>& f) {
  std::string s;
  for (const RankStats& r : m.rank_stats) s += (s.empty() ? "" : "/") + f(r);
  return s.empty() ? "-" : s;
}

// "s1.b0 g0, s1.b1 g0": the groups a (mode, size) ran on, with generations.
std::string GroupsUsed(const ModeResult& m) {
  std::string s;
  for (const auto& [name, generation] : m.groups_used) {
    s += (s.empty() ? "" : ", ") + name + " g" + std::to_string(generation);
  }
  return s.empty() ? "-" : s;
}

// The settings and the cold start of each dtype's daemon.
void PrintHeader(const MatrixOptions& o, const MatrixRun& run, std::ostream& out) {
  out << "vaed_bench_matrix: " << ModelKindName(o.model_kind) << " "
      << (o.weights.empty() ? "(random weights)" : o.weights) << "\n"
      << "daemon    " << o.vaed_binary << (run.daemon_version.empty() ? "" : " ")
      << run.daemon_version << ", intra_op_threads " << o.threads << ", host " << run.hostname
      << " (" << run.cpus << " CPUs)\n"
      << "runs      first request + " << o.warmup << " warm-up + " << o.iterations
      << " timed per mode, modes interleaved\n";
  if (o.group_ranks > 0 || !o.group_sizes.empty()) {
    std::string sizes;
    for (uint32_t size : o.group_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(size);
    out << "groups    --group-ranks " << std::max<uint32_t>(o.group_ranks, 1)
        << (sizes.empty() ? std::string(", the daemon's group size")
                          : ", sizes " + sizes + " (each mode at each size, interleaved)")
        << "\n";
  }
  out << "cold start (fork/exec to first Hello):";
  for (ComputeDtype dtype : o.dtypes) {
    auto it = run.cold_start_s.find(dtype);
    const bool started = it != run.cold_start_s.end() && it->second.has_value();
    out << "  " << ComputeDtypeName(dtype) << " "
        << (started ? FormatFixed(*it->second, 3) + " s" : std::string("FAILED"));
  }
  out << "\n";
}

// One row per mode: timings, tiling, peaks, speedup over eager, bytes.
void PrintModeTable(const MatrixOptions& o, const CellResult& cell, std::ostream& out) {
  ops::TextTable t(
      {"mode", "first s", "warm med s", "warm min s", "decode s", "vae s", "tile_dec s", "merge s",
       "tiles/call", "calls", "peak tensor", "peak rss", "vae vs eager", "bytes"},
      {false, true, true, true, true, true, true, true, true, true, true, true, false, false});
  for (const ModeResult& m : cell.modes) {
    if (!m.measured()) {
      t.AddRow({m.name(), StateName(m.state)});
      continue;
    }
    std::string first = OrDash(m.first_request_s, 3) + (m.first_request_warm ? " (warm)" : "");
    std::string speed = "-";
    if (m.spec->baseline) {
      speed = "baseline";
    } else if (m.vae_speedup) {
      speed = FormatSpeedup(*m.vae_speedup);
    }
    t.AddRow({m.name(), first, FormatFixed(Median(m.wall_s), 3),
              FormatFixed(*std::min_element(m.wall_s.begin(), m.wall_s.end()), 3),
              OrDash(m.TimingMedian("decode"), 3), OrDash(m.vae_median_s, 3),
              OrDash(m.TimingMedian("video_vae.tile_decode"), 3),
              OrDash(m.TimingMedian("video_vae.tile_merge"), 3),
              m.tiling ? std::to_string(m.tiling->max_tiles_per_call()) : "-",
              m.tiling ? std::to_string(m.tiling->decoder_calls()) : "-",
              ops::HumanBytes(m.peak_tensor_bytes), ops::HumanBytes(m.peak_rss_bytes), speed,
              BytesVerdict(o, m)});
  }
  out << t.Render();
}

// Per mode: why it did not run, or the daemon's decisions.
void PrintModeDecisions(const CellResult& cell, std::ostream& out) {
  for (const ModeResult& m : cell.modes) {
    out << "   " << m.name() << ": ";
    if (m.state != ModeState::kOk) {
      out << StateName(m.state) << ": " << m.reason << "\n";
      continue;
    }
    out << "profile " << m.profile << "; compile: " << m.compile_decision;
    if (m.tiling) {
      out << "; grid " << m.tiling->tile_rows() << "x" << m.tiling->tile_cols() << " x "
          << m.tiling->windows() << " windows; stack: " << m.tiling->stack_decision()
          << "; plans: " << m.tiling->plan_decision();
    }
    out << "\n";
  }
}

// The end-to-end speedup of each mode with a VAE speedup over eager, at
// each VAE share.
void PrintAmdahl(const MatrixOptions& o, const CellResult& cell, std::ostream& out) {
  bool any = false;
  ops::TextTable a({"mode", "vae speedup", "vae share", "end-to-end"}, {false, true, true, false});
  for (const ModeResult& m : cell.modes) {
    if (!m.vae_speedup || m.spec->baseline) continue;
    for (double s : o.vae_shares) {
      any = true;
      a.AddRow({m.name(), FormatFixed(*m.vae_speedup, 3), FormatFixed(s, 2),
                FormatSpeedup(EndToEndSpeedup(s, *m.vae_speedup))});
    }
  }
  if (any) out << "   Amdahl (end-to-end = 1 / ((1 - s) + s / v)):\n" << a.Render();
}

// Per (mode, group size): the group the daemon used and how evenly its
// ranks worked.
void PrintGroups(const MatrixOptions& o, const CellResult& cell, std::ostream& out) {
  ops::TextTable t(
      {"mode", "S", "group", "warm med s", "decode s", "vae s", "tile_dec s", "tile_comm s",
       "tiles/rank", "rank decode s", "imbalance",
       "vae vs S=" + std::to_string(o.group_sizes.front()), "bytes"},
      {false, true, false, true, true, true, true, true, false, false, true, false, false});
  for (const ModeResult& m : cell.modes) {
    if (!m.measured()) {
      t.AddRow({m.spec->name, std::to_string(m.group_size), StateName(m.state)});
      continue;
    }
    std::string speed = "-";
    if (m.group_size == o.group_sizes.front()) {
      speed = "baseline";
    } else if (m.group_vae_speedup) {
      speed = FormatSpeedup(*m.group_vae_speedup);
    }
    t.AddRow({m.spec->name, std::to_string(m.group_size), GroupsUsed(m),
              FormatFixed(Median(m.wall_s), 3), OrDash(m.TimingMedian("decode"), 3),
              OrDash(m.vae_median_s, 3), OrDash(m.TimingMedian("video_vae.tile_decode"), 3),
              OrDash(m.TimingMedian("video_vae.tile_communication"), 3),
              PerRank(m, [](const RankStats& r) { return std::to_string(r.tiles); }),
              PerRank(m, [](const RankStats& r) { return OrDash(RankDecodeMedian(r), 3); }),
              m.imbalance.empty() ? "-" : FormatFixed(Median(m.imbalance), 3), speed,
              BytesVerdict(o, m)});
  }
  out << "   VAE groups ('group': the groups used, 'g' generation; tiles/rank, rank decode s:\n"
         "   per position in the group, output rank first; rank decode s and imbalance\n"
         "   (max/mean of them): medians of the timed runs):\n"
      << t.Render();
  for (const ModeResult& m : cell.modes) {
    if (m.fallbacks > 0) {
      out << "   " << m.name() << ": " << m.fallbacks
          << " run(s) fell back to one rank; last: " << m.last_fallback << "\n";
    }
  }
}

void PrintCell(const MatrixOptions& o, const CellResult& cell, std::ostream& out) {
  out << "\n== " << ComputeDtypeName(cell.dtype) << "  latent " << ShapeToString(cell.latent.shape)
      << " (" << cell.latent.source << ")";
  if (!cell.output_shape.empty()) {
    out << " -> uint8 " << ShapeToString(cell.output_shape) << " ("
        << ops::HumanBytes(cell.output_bytes) << ")";
  }
  out << "\n";
  if (!cell.error.empty()) {
    out << "   FAILED: " << cell.error << "\n";
    return;
  }
  PrintModeTable(o, cell, out);
  PrintModeDecisions(cell, out);
  PrintAmdahl(o, cell, out);
  if (!o.group_sizes.empty()) PrintGroups(o, cell, out);
}

}  // namespace

void PrintMatrixReport(const MatrixOptions& o, const MatrixRun& run, std::ostream& out) {
  PrintHeader(o, run, out);
  for (const CellResult& cell : run.cells) PrintCell(o, cell, out);
}

}  // namespace vaed::bench
