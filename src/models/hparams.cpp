#include "models/hparams.h"

#include <cmath>

#include "common/error.h"

namespace ds4 {

std::optional<uint64_t> Hparams::uint_value(const std::string& key) const {
    const std::string full = arch_ + "." + key;
    const GgufValue* v = file_.find(full);
    if (!v) return std::nullopt;
    if (v->type == GgufValueType::ARRAY) {
        if (v->ints.empty()) throw Error(file_.path() + " has an empty array for '" + full + "'.");
        for (int64_t x : v->ints)
            if (x != v->ints[0])
                throw Error(file_.path() + " has per-layer values for '" + full + "', which this family does not support.");
        if (v->ints[0] < 0) throw Error(file_.path() + " has a negative value for '" + full + "'.");
        return static_cast<uint64_t>(v->ints[0]);
    }
    return file_.get_uint(full);
}

uint64_t Hparams::require_uint(const std::string& key) const {
    auto v = uint_value(key);
    if (!v) throw Error(file_.path() + " lacks metadata key '" + arch_ + "." + key + "'.");
    return *v;
}

uint64_t Hparams::uint_or(const std::string& key, uint64_t dflt) const { return uint_value(key).value_or(dflt); }

double Hparams::float_or(const std::string& key, double dflt) const {
    return file_.get_float(arch_ + "." + key).value_or(dflt);
}

bool Hparams::bool_or(const std::string& key, bool dflt) const { return file_.get_bool(arch_ + "." + key).value_or(dflt); }

std::optional<std::string> Hparams::string(const std::string& key) const { return file_.get_string(arch_ + "." + key); }

RopeParams rope_params_from_metadata(const Hparams& hp, int n_rot, bool neox) {
    RopeParams p;
    p.n_rot = n_rot;
    p.neox = neox;
    p.freq_base = static_cast<float>(hp.float_or("rope.freq_base", 10000.0));
    const std::string type = hp.string("rope.scaling.type").value_or("linear");
    if (type != "none" && type != "linear" && type != "yarn")
        throw Error(hp.file().path() + " uses rope scaling type '" + type + "', which ds4 does not support.");
    double factor = hp.float_or("rope.scaling.factor", 0.0);
    if (factor == 0.0) factor = hp.float_or("rope.scale_linear", 0.0);
    p.freq_scale = (factor == 0.0 || type == "none") ? 1.0f : static_cast<float>(1.0 / factor);
    const uint64_t n_ctx_train = hp.uint_or("context_length", 0);
    p.n_ctx_orig = static_cast<int>(hp.uint_or("rope.scaling.original_context_length", n_ctx_train));
    float attn_factor = 1.0f;
    if (type == "yarn") {
        p.ext_factor = 1.0f;
        const float f = 1.0f / p.freq_scale;
        const double log_mul = hp.float_or("rope.scaling.yarn_log_multiplier", 0.0);
        auto mscale = [](float scale, float m) { return scale <= 1.0f ? 1.0f : 0.1f * m * std::log(scale) + 1.0f; };
        attn_factor = log_mul != 0.0 ? mscale(f, 1.0f) / mscale(f, static_cast<float>(log_mul)) : mscale(f, 1.0f);
        // The kernel multiplies by 1 + 0.1 ln(1/freq_scale) itself when
        // extrapolating; llama.cpp cancels it here and so do we.
        attn_factor *= 1.0f / (1.0f + 0.1f * std::log(f));
    }
    p.attn_factor = attn_factor * static_cast<float>(hp.float_or("rope.scaling.attn_factor", 1.0));
    return p;
}

}  // namespace ds4
