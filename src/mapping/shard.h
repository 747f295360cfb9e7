// Shards: a GGUF file holding one layer slice of a model (ds4-gguf split),
// so a pipeline stage's machine keeps only its part on disk and maps it as
// ONE region. A shard keeps the whole model's metadata and tensor names
// (blk.N stays blk.N) and records its slice and the identity of the file it
// came from, so stages running shards of one model recognize each other.
#pragma once

#include <optional>
#include <string>

#include "common/layer_range.h"
#include "mapping/model_map.h"

namespace ds4 {

class GgufFile;

inline constexpr char kShardLayersKey[] = "ds4.shard.layers";            // "A:B", "A:output" or "A:B,output"
inline constexpr char kShardSourceKey[] = "ds4.shard.source_identity";  // the whole file's identity

// The tensors a stage running `layers` of this file needs: its blocks'
// tensors, the embedding when it starts at block 0, the output head when it
// owns it (and the embedding then too when the head is tied).
MapSelection stage_selection(const GgufFile& file, const LayerRange& layers);

struct ShardInfo {
    LayerRange layers;
    std::string source_identity;
};
// The slice a shard holds; none for a whole model. Throws ds4::Error when
// the keys are malformed.
std::optional<ShardInfo> shard_info(const GgufFile& file);

// Throws ds4::Error unless a process may run `layers` (resolved for the
// model's n_layer blocks) from this file: any slice of a whole model, only a
// part of its own slice from a shard.
void check_shard_layers(const GgufFile& file, const LayerRange& layers, int n_layer);

// Writes the tensors stage_selection picks, with the file's metadata and
// the shard keys, to `out`. Returns the bytes written. Throws ds4::Error
// for a slice outside the model (or outside the shard `in` already is) and
// on I/O failure (no partial file is left).
uint64_t write_shard(const GgufFile& in, const LayerRange& layers, const std::string& source_identity,
                     const std::string& out);

}  // namespace ds4
