#include "models/weights.h"

#include "common/error.h"

namespace ds4 {

namespace {
std::string shape_str(const int64_t* ne, size_t n) {
    std::string s = "[";
    for (size_t i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}
}  // namespace

WeightRef WeightBinder::bind(const GgufTensorInfo& t, std::initializer_list<int64_t> ne) {
    int64_t want[4] = {1, 1, 1, 1};
    size_t i = 0;
    for (int64_t v : ne) want[i++] = v;
    for (int d = 0; d < 4; ++d)
        if (t.ne[d] != want[d])
            throw Error(file_.path() + ": tensor '" + t.name + "' has shape " + shape_str(t.ne, t.n_dims ? t.n_dims : 1) +
                        ", expected " + shape_str(want, ne.size()) + ".");
    if (!ggml_type_traits(t.type).computable)
        throw Error(file_.path() + ": tensor '" + t.name + "' has type " + std::string(ggml_type_name(t.type)) +
                    ", which ds4 cannot compute with yet.");
    WeightRef w;
    w.type = t.type;
    w.data = map_.tensor_data(t);
    for (int d = 0; d < 4; ++d) w.ne[d] = t.ne[d];
    w.row_bytes = ggml_row_bytes(t.type, t.ne[0]);
    w.matrix_bytes = w.row_bytes * static_cast<size_t>(t.ne[1]);
    w.name = t.name;
    return w;
}

WeightRef WeightBinder::require(const std::string& name, std::initializer_list<int64_t> ne) {
    return bind(file_.require_tensor(name), ne);
}

WeightRef WeightBinder::optional(const std::string& name, std::initializer_list<int64_t> ne) {
    const GgufTensorInfo* t = file_.find_tensor(name);
    return t ? bind(*t, ne) : WeightRef{};
}

WeightRef WeightBinder::optional_scale(const std::string& name, int64_t n) {
    const GgufTensorInfo* t = file_.find_tensor(name);
    if (!t) return WeightRef{};
    if (t->type != GgmlType::F32)
        throw Error(file_.path() + ": scale tensor '" + name + "' must be f32, not " +
                    std::string(ggml_type_name(t->type)) + ".");
    return bind(*t, {n});
}

}  // namespace ds4
