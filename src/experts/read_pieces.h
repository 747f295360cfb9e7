// The pieces a batch of reads is cut into: no read larger than kReadPiece,
// so many are in flight at once even for one large span (a block's whole
// routed tensor), and O_DIRECT's bounce buffers stay small.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experts/file_reads.h"

namespace ds4 {

constexpr uint64_t kReadPiece = uint64_t(2) << 20;

struct ReadPiece {
    size_t span = 0;
    uint64_t start = 0, end = 0;  // file range still to read
};

inline std::vector<ReadPiece> split_into_pieces(const std::vector<ReadSpan>& spans) {
    std::vector<ReadPiece> pieces;
    for (size_t i = 0; i < spans.size(); ++i)
        for (uint64_t at = spans[i].offset, end = spans[i].offset + spans[i].bytes; at < end; at += kReadPiece)
            pieces.push_back(ReadPiece{i, at, std::min(end, at + kReadPiece)});
    return pieces;
}

// The sentence for a file that ends at `file_end`, inside span s.
inline std::string ended_early(const ReadSpan& s, uint64_t file_end) {
    return "the file ended after " + std::to_string(file_end) + " bytes, " +
           std::to_string(s.offset + s.bytes - std::max(file_end, s.offset)) + " bytes short";
}

}  // namespace ds4
