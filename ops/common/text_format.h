// Human-readable sizes, durations and aligned text tables for vaectl and the
// benchmark's terminal output. Machine-readable output (--json) never goes
// through these: it carries raw bytes and seconds.
//
// Thread-safety: pure functions; a TextTable is a plain value.
#ifndef VAED_OPS_COMMON_TEXT_FORMAT_H_
#define VAED_OPS_COMMON_TEXT_FORMAT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vaed::ops {

// Binary units with one decimal: "0 B", "1023 B", "1.0 KiB", "5.1 MiB",
// "2.0 GiB", up to "EiB".
std::string HumanBytes(uint64_t bytes);

// A duration in seconds, e.g. "850 us", "12.5 ms", "3.42 s", "5m 07s",
// "3h 12m", "2d 04h". Negative or non-finite input gives "-".
std::string HumanDuration(double seconds);

// `value` with `decimals` digits after the point ("%.*f"); "inf"/"-inf"/
// "nan" for non-finite values.
std::string FormatFixed(double value, int decimals);

// `items` joined by `separator`: Join({"a", "b"}, ", ") is "a, b"; "" for
// no items.
std::string Join(const std::vector<std::string>& items, std::string_view separator);

// A table rendered with columns padded to their widest cell, separated by
// two spaces; a header row followed by a rule of dashes. Columns marked
// right-aligned (numbers) are padded on the left.
//
//   TextTable t({"component", "seconds", "ms"}, {false, true, true});
//   t.AddRow({"decode", "0.4810", "481.0"});
//   std::cout << t.Render();
class TextTable {
 public:
  // `right_align` may be shorter than `header`; missing entries are
  // left-aligned. An empty `header` renders neither header nor rule
  // (label/value lists).
  explicit TextTable(std::vector<std::string> header, std::vector<bool> right_align = {});

  // Rows shorter than the header are padded with empty cells; longer rows
  // widen the table.
  void AddRow(std::vector<std::string> row);

  // Each line, the header included, ends with '\n'; no trailing spaces.
  std::string Render() const;

 private:
  std::vector<std::vector<std::string>> rows_;  // rows_[0] is the header
  std::vector<bool> right_align_;
};

}  // namespace vaed::ops

#endif  // VAED_OPS_COMMON_TEXT_FORMAT_H_
