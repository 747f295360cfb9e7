#include "models/weights.h"

#include "mapping/shard.h"

#include "common/error.h"

namespace ds4 {

namespace {
std::string shape_str(const int64_t* ne, size_t n) {
    std::string s = "[";
    for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

std::string tensor_shape(const GgufTensorInfo& t) { return shape_str(t.ne, t.n_dims ? t.n_dims : 1); }
}  // namespace

void WeightBinder::check_shape(const GgufTensorInfo& t, std::initializer_list<Dim> ne) const {
    int64_t want[kGgufMaxDims] = {1, 1, 1, 1};
    const Dim* dims = ne.begin();
    for (size_t i = 0; i < ne.size(); ++i) want[i] = dims[i].n;
    for (int d = 0; d < kGgufMaxDims; ++d) {
        if (t.ne[d] == want[d]) continue;
        const bool sourced = static_cast<size_t>(d) < ne.size() && !dims[d].from.empty();
        throw Error(file_.path() + ": tensor '" + t.name + "' has shape " + tensor_shape(t) + ", expected " +
                    shape_str(want, ne.size()) +
                    (sourced ? " (dimension " + std::to_string(d) + " from " + dims[d].from + ")" : std::string()) + ".");
    }
}

WeightRef WeightBinder::bind(const GgufTensorInfo& t, std::initializer_list<Dim> ne) {
    check_shape(t, ne);
    if (!ggml_type_traits(t.type).computable)
        throw Error(file_.path() + ": tensor '" + t.name + "' has type " + std::string(ggml_type_name(t.type)) +
                    ", which ds4 cannot compute with.");
    WeightRef w;
    w.type = t.type;
    const bool routed = tensor_role(t.name) == TensorRole::RoutedExperts;
    w.data = bind_data_ && (experts_resident_ || !routed) ? map_.tensor_data(t) : nullptr;
    w.offset = t.file_offset;
    for (int d = 0; d < 4; ++d) w.ne[d] = t.ne[d];
    w.row_bytes = ggml_row_bytes(t.type, t.ne[0]);
    w.matrix_bytes = w.row_bytes * static_cast<size_t>(t.ne[1]);
    w.name = t.name;
    return w;
}

WeightBinder::WeightBinder(const GgufFile& file, ModelMap& map)
    : file_(file), map_(map), shard_(shard_info(file).has_value()) {}

WeightRef WeightBinder::require(const std::string& name, std::initializer_list<Dim> ne) {
    // Only checked, not bound (another stage's tensor): a shard does not hold it.
    if (!bind_data_ && shard_ && !file_.find_tensor(name)) return WeightRef{};
    return bind(file_.require_tensor(name), ne);
}

WeightRef WeightBinder::optional(const std::string& name, std::initializer_list<Dim> ne) {
    const GgufTensorInfo* t = file_.find_tensor(name);
    return t ? bind(*t, ne) : WeightRef{};
}

WeightRef WeightBinder::optional_scale(const std::string& name, Dim n) {
    const GgufTensorInfo* t = file_.find_tensor(name);
    if (!t) return WeightRef{};
    if (t->type != GgmlType::F32)
        throw Error(file_.path() + ": scale tensor '" + name + "' must be f32, not " +
                    std::string(ggml_type_name(t->type)) + ".");
    return bind(*t, {std::move(n)});
}

WeightRef WeightBinder::require_i32(const std::string& name, std::initializer_list<Dim> ne) {
    const GgufTensorInfo& t = file_.require_tensor(name);
    check_shape(t, ne);
    if (t.type != GgmlType::I32)
        throw Error(file_.path() + ": tensor '" + name + "' has type " + std::string(ggml_type_name(t.type)) +
                    "; it must be i32.");
    if (t.file_offset % sizeof(int32_t) != 0)
        throw Error(file_.path() + ": tensor '" + name + "' starts at byte " + std::to_string(t.file_offset) +
                    ", which is not a multiple of 4.");
    WeightRef w;
    w.type = t.type;
    w.data = bind_data_ ? map_.tensor_data(t) : nullptr;
    w.offset = t.file_offset;
    for (int d = 0; d < 4; ++d) w.ne[d] = t.ne[d];
    w.row_bytes = sizeof(int32_t) * static_cast<size_t>(t.ne[0]);
    w.matrix_bytes = w.row_bytes * static_cast<size_t>(t.ne[1]);
    w.name = t.name;
    return w;
}

int64_t WeightBinder::dim(const std::string& name, int d) {
    const GgufTensorInfo& t = file_.require_tensor(name);
    const int64_t n = t.ne[d];
    if (n < 1 || n > kMaxHparamCount)
        throw Error(file_.path() + ": tensor '" + name + "' has shape " + tensor_shape(t) + "; its dimension " +
                    std::to_string(d) + " must be 1.." + std::to_string(kMaxHparamCount) + ".");
    return n;
}

int64_t bind_vocab_size(const Hparams& hp, WeightBinder& wb) {
    const GgufFile& f = hp.file();
    const std::string embd = "token_embd.weight";
    if (wb.shard() && !f.find_tensor(embd)) {
        // A shard of a later stage: ds4-gguf split records the size.
        const int64_t n = hp.count_or("vocab_size", 0);
        if (n < 1) throw Error(f.path() + " is a shard without " + hp.key("vocab_size") + ".");
        return n;
    }
    const int64_t n = wb.dim(embd, 1);
    const int64_t stated = hp.count_or("vocab_size", n);
    if (stated != n)
        throw Error(f.path() + ": tensor '" + embd + "' has " + std::to_string(n) + " rows, but metadata key '" +
                    hp.key("vocab_size") + "' is " + std::to_string(stated) + ".");
    if (const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
        tokens && tokens->type == GgufValueType::ARRAY && static_cast<int64_t>(tokens->array_size()) > n)
        throw Error(f.path() + ": its tokenizer has " + std::to_string(tokens->array_size()) +
                    " tokens (tokenizer.ggml.tokens), but tensor '" + embd + "' has only " + std::to_string(n) +
                    " rows.");
    return n;
}

}  // namespace ds4
