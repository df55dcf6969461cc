// Summary statistics of benchmark samples (seconds, ratios).
//
// Thread-safety: pure functions.
#ifndef VAED_OPS_COMMON_SAMPLE_STATS_H_
#define VAED_OPS_COMMON_SAMPLE_STATS_H_

#include <vector>

namespace vaed::ops {

// The median of `samples`: the middle value of an odd count, the mean of
// the two middle values of an even count. Precondition: `samples` is not
// empty.
double Median(std::vector<double> samples);

}  // namespace vaed::ops

#endif  // VAED_OPS_COMMON_SAMPLE_STATS_H_
