// An expert pack: a sidecar file beside a GGUF model that holds every routed
// expert's bytes expert-major, one record per (block, expert) with its gate,
// up and down matrices (and its per-expert scales) side by side, so the
// expert cache fills a miss with one read of one 4 KiB-aligned range (what
// O_DIRECT wants, no slack) instead of three reads from the GGUF.
//
// A sidecar, not a rewritten GGUF: llama.cpp (ggml/src/gguf.cpp) requires
// each tensor's data offset to equal the alignment-padded size of the
// tensors before it, and a routed expert tensor holds all experts of one
// matrix kind contiguously, so no GGUF llama.cpp loads can keep one
// expert's three matrices adjacent. The model file stays as it was.
//
// The file (little-endian), written by write_expert_pack:
//   header   magic "DS4XPACK", version, flags (0), header size, file size,
//            the source model's identity (mapping/model_identity), and per
//            block: layer, expert count, record size, first record's offset
//            and its parts (kind, ggml type, offset in the record, bytes,
//            source tensor name); then the xxh3-64 of all that; zero padding
//            to a multiple of kPackAlign.
//   records  block by block, expert by expert; each kPackAlign-aligned and
//            -sized, its parts at kPackPartAlign, padding zero.
//   trailer  magic "DS4XTAIL", the record count, the xxh3-64 of every
//            record, the header's checksum, the xxh3-64 of the trailer.
// The layout is a function of the parts' sizes alone (pack_layout), and a
// reader accepts only that layout; a file cut short loses its trailer; a
// damaged record fails the read that brings it in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experts/expert_source.h"
#include "gguf/ggml_type.h"

namespace ds4 {

constexpr uint32_t kPackVersion = 1;
// Record offsets and sizes: a device's logical block (O_DIRECT), a page.
constexpr uint64_t kPackAlign = 4096;
// Parts within a record: the expert cache's slot alignment, so a record
// read into a slot leaves each matrix where the vectorised loads want it.
constexpr uint64_t kPackPartAlign = 256;

enum class PackPart : uint8_t { gate = 0, up, down, gate_scale, up_scale, down_scale };
const char* pack_part_name(PackPart p);

struct PackPartLayout {
    PackPart kind = PackPart::gate;
    GgmlType type = GgmlType::F32;
    uint64_t offset = 0;  // in the record
    uint64_t bytes = 0;   // one expert's
    std::string tensor;   // the GGUF tensor it comes from
};

struct PackBlock {
    int layer = -1;  // in the whole model's numbering
    int64_t n_expert = 0;
    uint64_t record_bytes = 0;
    uint64_t first_record = 0;  // file offset of expert 0's record
    size_t first_index = 0;     // its index among all records (checksums)
    std::vector<PackPartLayout> parts;  // gate, up, down, then any scales, in PackPart order
    const PackPartLayout* part(PackPart k) const;
    uint64_t record_offset(int64_t expert) const { return first_record + uint64_t(expert) * record_bytes; }
};

struct PackLayout {
    std::string identity;
    std::vector<PackBlock> blocks;  // by ascending layer
    uint64_t header_bytes = 0;
    uint64_t records_end = 0;
    uint64_t file_bytes = 0;
    uint64_t n_records() const;
};

// Fills every offset and size of `layout` from its blocks' layers, expert
// counts and part kinds, types, sizes and names. Throws ds4::Error for
// blocks out of order, without gate, up and down, or of absurd sizes.
void pack_layout(PackLayout& layout);

// The header's bytes (padded to layout.header_bytes) and its checksum.
std::string encode_pack_header(const PackLayout& layout, uint64_t& checksum);
// The trailer's bytes for these record checksums.
std::string encode_pack_trailer(const std::vector<uint64_t>& record_sums, uint64_t header_checksum);
uint64_t pack_trailer_bytes(uint64_t n_records);

// The checksum of one record's bytes (padding included).
uint64_t pack_record_checksum(const uint8_t* bytes, uint64_t n);

// An opened, checked pack.
class ExpertPack {
public:
    // Reads and checks the header and trailer of `path`. Throws ds4::Error,
    // one sentence naming the file, when it is not a pack, is of another
    // version, is cut short or longer than its header says, or is damaged.
    static ExpertPack open(const std::string& path);

    const std::string& path() const { return path_; }
    const PackLayout& layout() const { return layout_; }
    const PackBlock* block(int layer) const;

    // Throws ds4::Error unless the pack was made from the model `identity`
    // and holds each of `blocks` as the model binds it (expert count, the
    // gate, up and down tensors' names, types and sizes per expert, and a
    // part for each per-expert scale).
    void check_matches(const std::string& identity, const std::vector<RoutedExperts>& blocks) const;

    // Whether `bytes` (record_bytes of them) are expert `expert`'s record
    // of `b` as packed.
    bool record_intact(const PackBlock& b, int64_t expert, const uint8_t* bytes) const;

private:
    std::string path_;
    PackLayout layout_;
    std::vector<uint64_t> sums_;  // per record
};

}  // namespace ds4
