#include "mapping/shard.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace ds4 {

namespace {
int block_count(const GgufFile& f) {
    const auto n = f.get_uint(f.architecture() + ".block_count");
    if (!n) throw Error(f.path() + " has no " + f.architecture() + ".block_count.");
    return static_cast<int>(*n);
}
}  // namespace

MapSelection stage_selection(const GgufFile& file, const LayerRange& layers) {
    MapSelection s;
    s.layers = layers;
    if (const auto n_layer = file.get_uint(file.architecture() + ".block_count")) {
        const bool head = layers.has_output(static_cast<int>(*n_layer));
        s.output = head;
        s.embedding = layers.has_embedding() || (head && !file.find_tensor("output.weight"));
    }
    return s;
}

std::optional<ShardInfo> shard_info(const GgufFile& file) {
    const auto spelled = file.get_string(kShardLayersKey);
    if (!spelled) return std::nullopt;
    ShardInfo s;
    try {
        s.layers = parse_layer_range(*spelled);
    } catch (const Error&) {
        throw Error(file.path() + " records a malformed shard slice '" + *spelled + "'.");
    }
    s.source_identity = file.get_string(kShardSourceKey).value_or("");
    if (s.source_identity.empty()) throw Error(file.path() + " is a shard without its source's identity.");
    return s;
}

void check_shard_layers(const GgufFile& file, const LayerRange& layers, int n_layer) {
    const auto shard = shard_info(file);
    if (!shard) return;
    const LayerRange have = shard->layers.resolved(n_layer), want = layers.resolved(n_layer);
    if (want.begin < have.begin || want.end > have.end || (want.has_output(n_layer) && !have.has_output(n_layer)))
        throw Error(file.path() + " is a shard holding only blocks " + shard->layers.spelling(n_layer) +
                    " of the model (ds4-gguf split); run it with --layers " + shard->layers.spelling(n_layer) +
                    " or a part of that, not " + (layers.is_all() ? std::string("the whole model") : want.spelling(n_layer)) +
                    ".");
}

uint64_t write_shard(const GgufFile& in, const LayerRange& layers, const std::string& source_identity,
                     const std::string& out) {
    const int n_layer = block_count(in);
    if (const std::string why = layer_range_problem(layers, n_layer); !why.empty())
        throw Error("--layers " + why);
    check_shard_layers(in, layers, n_layer);
    // A shard of a shard keeps the identity of the file both came from.
    const auto from = shard_info(in);
    const std::string identity = from ? from->source_identity : source_identity;
    GgufWriter w(in.alignment());
    for (const auto& [key, value] : in.metadata())
        if (key != "general.alignment") w.set(key, value);
    w.set(kShardLayersKey, GgufValue::string(layers.spelling(n_layer)));
    // A later stage's shard has no embedding to count the vocabulary from.
    const std::string vocab_key = in.architecture() + ".vocab_size";
    if (!in.find(vocab_key))
        if (const GgufTensorInfo* e = in.find_tensor("token_embd.weight"))
            w.set(vocab_key, GgufValue::u32(static_cast<uint32_t>(e->ne[1])));
    w.set(kShardSourceKey, GgufValue::string(identity));
    const MapSelection sel = stage_selection(in, layers);
    const int fd = in.fd();
    const std::string path = in.path();
    for (const GgufTensorInfo& t : in.tensors()) {
        if (!sel.selects(t.name)) continue;
        const uint64_t base = t.file_offset;
        w.add_tensor_streamed(t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims),
                              [fd, base, path](uint64_t off, uint8_t* dst, size_t n) {
                                  size_t done = 0;
                                  while (done < n) {
                                      const ssize_t got = ::pread(fd, dst + done, n - done,
                                                                  static_cast<off_t>(base + off + done));
                                      if (got < 0 && errno == EINTR) continue;
                                      if (got <= 0)
                                          throw Error("cannot read " + path + " (" +
                                                      (got < 0 ? std::string(std::strerror(errno))
                                                               : std::string("it ends early")) +
                                                      ").");
                                      done += static_cast<size_t>(got);
                                  }
                              });
    }
    w.write(out);
    return w.file_size();
}

}  // namespace ds4
