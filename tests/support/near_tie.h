// When a differing argmax between two logits rows is forgiven, shared by the
// oracle tests (ds4 vs llama.cpp) and the CUDA tests (GPU vs CPU).
//
// Two correct float engines differ by rounding noise spread over the whole
// row. Where the reference's margin between its token and ours is below that
// noise, the two cannot be told apart and either choice is right. The noise
// is measured on the row itself (its RMS difference), not taken from the
// tolerance: 2e-4 * ||row|| (the old rule) holds dozens of tokens of a 150k
// vocabulary, so an excuse that wide could never fail. An error concentrated
// on the two tokens (a real bug) leaves the RMS small and is not excused.
// With rounding noise e ~ N(0, rms^2) per logit, a flip needs margin <
// e_ours - e_ref ~ N(0, 2 rms^2): 4 rms covers 99.5% of genuine flips.
// Excused rows are counted; more than kMaxNearTiesPer64 per 64 rows fail.
#pragma once

#include <cmath>
#include <cstddef>

namespace ds4::test {

inline constexpr double kNearTieRmsFactor = 4.0;
inline constexpr size_t kMaxNearTiesPer64 = 3;

// sqrt(mean((ours - ref)^2)) over one row of n logits.
inline double rms_diff(const float* ours, const float* ref, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += (double(ours[i]) - ref[i]) * (double(ours[i]) - ref[i]);
    return n ? std::sqrt(s / double(n)) : 0.0;
}

// Whether ours choosing `ours_arg` where the reference chose `ref_arg` is
// within the row's measured noise.
inline bool near_tie(const float* ours, const float* ref, size_t n, size_t ours_arg, size_t ref_arg) {
    return double(ref[ref_arg]) - double(ref[ours_arg]) <= kNearTieRmsFactor * rms_diff(ours, ref, n);
}

// How many excused rows `rows` compared rows may hold.
inline size_t allowed_near_ties(size_t rows) { return kMaxNearTiesPer64 * ((rows + 63) / 64); }

}  // namespace ds4::test
