#include "ops/common/text_format.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <utility>

namespace vaed::ops {

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  return buf;
}

std::string HumanDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  char buf[48];
  if (seconds < 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.0f us", seconds * 1e6);
  } else if (seconds < 1.0) {
    std::snprintf(buf, sizeof(buf), "%.1f ms", seconds * 1e3);
  } else if (seconds < 60.0) {
    std::snprintf(buf, sizeof(buf), "%.2f s", seconds);
  } else {
    // Whole seconds from here on; two units are enough to read an uptime.
    const auto total = static_cast<uint64_t>(seconds);
    const uint64_t days = total / 86400, hours = total / 3600 % 24, minutes = total / 60 % 60,
                   secs = total % 60;
    if (total < 3600) {
      std::snprintf(buf, sizeof(buf), "%" PRIu64 "m %02" PRIu64 "s", minutes, secs);
    } else if (total < 86400) {
      std::snprintf(buf, sizeof(buf), "%" PRIu64 "h %02" PRIu64 "m", hours, minutes);
    } else {
      std::snprintf(buf, sizeof(buf), "%" PRIu64 "d %02" PRIu64 "h", days, hours);
    }
  }
  return buf;
}

std::string FormatFixed(double value, int decimals) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

std::string Join(const std::vector<std::string>& items, std::string_view separator) {
  std::string joined;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) joined += separator;
    joined += items[i];
  }
  return joined;
}

TextTable::TextTable(std::vector<std::string> header, std::vector<bool> right_align)
    : right_align_(std::move(right_align)) {
  rows_.push_back(std::move(header));
}

void TextTable::AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

std::string TextTable::Render() const {
  size_t columns = 0;
  for (const auto& row : rows_) columns = std::max(columns, row.size());
  std::vector<size_t> width(columns, 0);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  auto render_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < columns; ++c) {
      const std::string empty;
      const std::string& cell = c < row.size() ? row[c] : empty;
      const std::string pad(width[c] - cell.size(), ' ');
      if (c > 0) line += "  ";
      const bool right = c < right_align_.size() && right_align_[c];
      line += right ? pad + cell : cell + pad;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  std::string out;
  if (!rows_[0].empty()) {
    out = render_row(rows_[0]);
    size_t total = 0;
    for (size_t c = 0; c < columns; ++c) total += width[c] + (c > 0 ? 2 : 0);
    out += std::string(total, '-') + "\n";
  }
  for (size_t r = 1; r < rows_.size(); ++r) out += render_row(rows_[r]);
  return out;
}

}  // namespace vaed::ops
