#include "models/hparams.h"

#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace ds4 {

namespace {
std::string number_text(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}
}  // namespace

std::optional<uint64_t> Hparams::uint_value(const std::string& k) const {
    const std::string full = key(k);
    const GgufValue* v = file_.find(full);
    if (!v) return std::nullopt;
    if (v->type != GgufValueType::ARRAY) return file_.get_uint(full);
    if (!gguf_value_type_is_integer(v->elem_type) || v->elem_type == GgufValueType::BOOL)
        throw Error(file_.path() + ": metadata key '" + full + "' is an array of " +
                    gguf_value_type_name(v->elem_type) + ", not of integers.");
    if (v->ints.empty()) throw Error(file_.path() + " has an empty array for metadata key '" + full + "'.");
    for (int64_t x : v->ints)
        if (x != v->ints[0])
            throw Error(file_.path() + " has per-layer values for metadata key '" + full +
                        "', which this family does not support.");
    // u64 elements are stored as their bit pattern: those above INT64_MAX look negative.
    if (v->ints[0] < 0 && v->elem_type != GgufValueType::U64)
        throw Error(file_.path() + " has a negative value for metadata key '" + full + "'.");
    return static_cast<uint64_t>(v->ints[0]);
}

std::string Hparams::quoted(const std::string& k) const {
    std::string q = "'";  // appended, not "'" + ...: gcc 12 warns falsely (-Wrestrict) on that
    q += key(k);
    q += '\'';
    return q;
}

int64_t Hparams::count(const std::string& k, int64_t lo, int64_t hi) const {
    if (!file_.find(key(k))) throw Error(file_.path() + " lacks metadata key '" + key(k) + "'.");
    return count_or(k, 0, lo, hi);
}

int64_t Hparams::count_or(const std::string& k, int64_t dflt, int64_t lo, int64_t hi) const {
    const auto v = uint_value(k);
    if (!v) return dflt;
    if (*v < static_cast<uint64_t>(lo) || *v > static_cast<uint64_t>(hi))
        throw Error(file_.path() + ": metadata key '" + key(k) + "' is " + std::to_string(*v) + ", outside " +
                    std::to_string(lo) + ".." + std::to_string(hi) + ".");
    return static_cast<int64_t>(*v);
}

double Hparams::number_or(const std::string& k, double dflt, NumberRange range) const {
    const auto v = file_.get_float(key(k));
    if (!v) return dflt;
    const bool ok = std::isfinite(*v) && (range == NumberRange::Any || (range == NumberRange::NonNegative && *v >= 0) ||
                                          (range == NumberRange::Positive && *v > 0));
    if (!ok)
        throw Error(file_.path() + ": metadata key '" + key(k) + "' is " + number_text(*v) + "; it must be a finite number" +
                    (range == NumberRange::Positive ? " > 0" : range == NumberRange::NonNegative ? " >= 0" : "") + ".");
    return *v;
}

bool Hparams::bool_or(const std::string& k, bool dflt) const { return file_.get_bool(key(k)).value_or(dflt); }

std::optional<std::string> Hparams::string(const std::string& k) const { return file_.get_string(key(k)); }

RopeParams rope_params_from_metadata(const Hparams& hp, int n_rot, bool neox) {
    RopeParams p;
    p.n_rot = n_rot;
    p.neox = neox;
    p.freq_base = static_cast<float>(hp.number_or("rope.freq_base", 10000.0, NumberRange::Positive));
    const std::string type = hp.string("rope.scaling.type").value_or("linear");
    if (type != "none" && type != "linear" && type != "yarn")
        throw Error(hp.file().path() + ": metadata key '" + hp.key("rope.scaling.type") + "' is '" + type +
                    "', which ds4 does not support (none, linear, yarn).");
    double factor = hp.number_or("rope.scaling.factor", 0.0, NumberRange::NonNegative);
    if (factor == 0.0) factor = hp.number_or("rope.scale_linear", 0.0, NumberRange::NonNegative);
    p.freq_scale = (factor == 0.0 || type == "none") ? 1.0f : static_cast<float>(1.0 / factor);
    const int64_t n_ctx_train = hp.count_or("context_length", 0, 0, kMaxHparamContext);
    p.n_ctx_orig = static_cast<int>(hp.count_or("rope.scaling.original_context_length", n_ctx_train, 0, kMaxHparamContext));
    float attn_factor = 1.0f;
    if (type == "yarn") {
        p.ext_factor = 1.0f;
        const float f = 1.0f / p.freq_scale;
        const double log_mul = hp.number_or("rope.scaling.yarn_log_multiplier", 0.0, NumberRange::Any);
        auto mscale = [](float scale, float m) { return scale <= 1.0f ? 1.0f : 0.1f * m * std::log(scale) + 1.0f; };
        attn_factor = log_mul != 0.0 ? mscale(f, 1.0f) / mscale(f, static_cast<float>(log_mul)) : mscale(f, 1.0f);
        // The kernel multiplies by 1 + 0.1 ln(1/freq_scale) itself when
        // extrapolating; llama.cpp cancels it here and so do we.
        attn_factor *= 1.0f / (1.0f + 0.1f * std::log(f));
    }
    p.attn_factor = attn_factor * static_cast<float>(hp.number_or("rope.scaling.attn_factor", 1.0, NumberRange::Positive));
    return p;
}

}  // namespace ds4
