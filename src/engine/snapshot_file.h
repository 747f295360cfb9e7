// One sequence snapshot as a file: what the server's disk KV cache keeps so a
// restarted server resumes a long prompt instead of evaluating it again.
//
// Layout (little-endian): a header (magic, version, codec, the model's
// identity, n_past, the tokens, each tensor's float count, the payload's
// sizes and hash; from version 2 also each later pipeline stage's part:
// its blocks, model identity and tensor sizes), the header's own hash, then the tensors' floats in frames
// of at most 64 MiB, each compressed with zstd or lz4. Every count is
// bounded and every byte hashed, so a truncated, corrupt or foreign file is
// refused with a sentence, never restored into a slot. Version 1 files (no
// stage parts) still load; their route replays on restore.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/session.h"

namespace ds4 {

enum class SnapshotCodec : uint32_t { zstd = 1, lz4 = 2 };

// "zstd" or "lz4"; nullopt-like failure is a ds4::Error naming the value.
SnapshotCodec parse_snapshot_codec(const std::string& name);
const char* snapshot_codec_name(SnapshotCodec codec);

// What the header says: enough to index a file without reading its payload.
struct SnapshotFileHeader {
    std::string model_identity;
    SnapshotCodec codec = SnapshotCodec::zstd;
    int64_t n_past = 0;
    std::vector<int32_t> tokens;
    std::vector<uint64_t> tensor_floats;  // floats per tensor
    struct Part {  // a later pipeline stage's share, in route order
        int32_t begin = 0, end = 0;
        std::string model_id;
        std::vector<uint64_t> tensor_floats;
    };
    std::vector<Part> parts;  // their floats follow this process's in the payload
    uint32_t version = 0;
    uint64_t payload_bytes = 0;           // compressed frames, as stored
    uint64_t header_bytes = 0;            // where the payload starts
};

// Writes `snap` to `path` so that no reader ever sees a partial file: a
// temporary file beside it (named `tmp_path`), fsync, rename, fsync of the
// directory. Throws ds4::Error naming the path and errno on a failed write
// (the temporary file is removed).
void write_snapshot_file(const std::string& path, const std::string& tmp_path, const SessionSnapshot& snap,
                         const std::string& model_identity, SnapshotCodec codec);

// Reads and checks the header only. Throws ds4::Error (one sentence) for a
// file that is not a snapshot, is truncated, or whose header hash differs.
SnapshotFileHeader read_snapshot_header(const std::string& path);

// Reads the whole file: the header, then every frame, decompressed and
// checked against the payload hash. Throws ds4::Error (one sentence) when
// anything differs, including a model identity other than `model_identity`.
SessionSnapshot read_snapshot_file(const std::string& path, const std::string& model_identity);

}  // namespace ds4
