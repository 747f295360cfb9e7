// Rewrites a GGUF file tensor by tensor with ggml's own gguf API, so the
// oracle tools (llama_dequant, llama_strip_scales) change a file the way
// llama.cpp itself would read and write it, not the way ds4's writer does.
// Metadata is copied whole and tensor order is kept.
#pragma once

#include <gguf.h>
#include <ggml.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include "oracle_ggml_ptr.h"

namespace ds4::oracle {

// What the rewrite does with one tensor of the input.
enum class TensorAction { keep, drop, to_f32 };

struct RewriteStats {
    int64_t kept = 0;
    int64_t dropped = 0;
    int64_t converted = 0;
};

// Reads `in` fully into memory (the oracle models are a few MB), applies
// `decide` to every tensor in file order, lets `edit_metadata` (when given)
// change the copied metadata, and writes `out`. Throws std::runtime_error
// with one sentence on any failure.
inline RewriteStats gguf_rewrite(const std::string& in, const std::string& out,
                                 const std::function<TensorAction(const ggml_tensor&)>& decide,
                                 const std::function<void(gguf_context*)>& edit_metadata = {}) {
    ggml_context* src_data = nullptr;
    gguf_init_params params{/*no_alloc=*/false, /*ctx=*/&src_data};
    gguf_context* src = gguf_init_from_file(in.c_str(), params);
    if (src == nullptr) {
        throw std::runtime_error("cannot read GGUF file " + in);
    }
    const ds4::oracle::GgufPtr src_owner(src);
    const ds4::oracle::GgmlPtr src_data_owner(src_data);

    const int64_t n_tensors = gguf_get_n_tensors(src);
    size_t need = ggml_tensor_overhead() * size_t(n_tensors + 1) + 1024;
    for (int64_t i = 0; i < n_tensors; ++i) {
        const ggml_tensor* t = ggml_get_tensor(src_data, gguf_get_tensor_name(src, i));
        need += ggml_nelements(t) * sizeof(float) + GGML_MEM_ALIGN;
    }
    ggml_init_params ip{need, nullptr, /*no_alloc=*/false};
    ggml_context* dst_data = ggml_init(ip);
    gguf_context* dst = gguf_init_empty();
    const ds4::oracle::GgufPtr dst_owner(dst);
    const ds4::oracle::GgmlPtr dst_data_owner(dst_data);
    gguf_set_kv(dst, src);
    if (edit_metadata) edit_metadata(dst);

    RewriteStats stats;
    std::string error;
    for (int64_t i = 0; i < n_tensors && error.empty(); ++i) {
        const char* name = gguf_get_tensor_name(src, i);
        ggml_tensor* t = ggml_get_tensor(src_data, name);
        switch (decide(*t)) {
            case TensorAction::drop:
                ++stats.dropped;
                break;
            case TensorAction::keep:
                gguf_add_tensor(dst, t);
                ++stats.kept;
                break;
            case TensorAction::to_f32: {
                if (t->type == GGML_TYPE_F32) {
                    gguf_add_tensor(dst, t);
                    ++stats.kept;
                    break;
                }
                const ggml_type_traits* traits = ggml_get_type_traits(t->type);
                if (traits == nullptr || traits->to_float == nullptr) {
                    error = std::string("tensor ") + name + " has type " + ggml_type_name(t->type) +
                            ", which ggml cannot convert to F32";
                    break;
                }
                ggml_tensor* f = ggml_new_tensor(dst_data, GGML_TYPE_F32, ggml_n_dims(t), t->ne);
                ggml_set_name(f, name);
                // GGUF tensors are contiguous and every row is whole blocks, so
                // the whole tensor converts in one call.
                traits->to_float(t->data, static_cast<float*>(f->data), ggml_nelements(t));
                gguf_add_tensor(dst, f);
                ++stats.converted;
                break;
            }
        }
    }

    // A file that no longer holds quantized tensors should not claim a
    // quantized file type (llama.cpp only prints it, but keep it honest).
    if (error.empty() && stats.converted > 0) {
        const int64_t k = gguf_find_key(dst, "general.file_type");
        if (k >= 0 && gguf_get_kv_type(dst, k) == GGUF_TYPE_UINT32) {
            gguf_set_val_u32(dst, "general.file_type", 0);  // LLAMA_FTYPE_ALL_F32
        }
    }
    if (error.empty() && !gguf_write_to_file(dst, out.c_str(), /*only_meta=*/false)) {
        error = "cannot write GGUF file " + out;
    }
    if (!error.empty()) {
        throw std::runtime_error(error);
    }
    return stats;
}

inline bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The optional per-tensor multipliers llama.cpp's model loader looks for
// (`<weight>.scale`, `<weight>.input_scale`): test-llama-archs fills them,
// published files do not carry them.
inline bool is_optional_scale_tensor(const std::string& name) {
    return ends_with(name, ".scale") || ends_with(name, ".input_scale");
}

}  // namespace ds4::oracle
