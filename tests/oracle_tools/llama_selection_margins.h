// How close llama.cpp came, at each position, to choosing a different set in
// one of its top-k selections: the MoE router's scored expert choice
// (`ffn_moe_probs_biased` or `ffn_moe_probs`, where `ffn_moe_argsort` ran; a
// hash-routed layer has no choice to make), DeepSeek V4's lightning
// indexer (`lid_score_masked`, k = the width of `lid_top_k`) and GLM-5's
// (`indexer_score`, k = the width of `top_k`; every glm-dsa block keeps the
// same k, and a block that reuses an earlier block's top-k renames that
// tensor, so any block's width serves).
//
// Why the oracle tests need this: two float32 engines that sum in different
// orders disagree in the last bits of every score. Where the k-th and
// (k+1)-th scores of a row are that close, the two engines may pick
// different sets, and the logits then differ by ~1e-2 however correct both
// are. The margin, (k-th - (k+1)-th) / max |score| of the row, lets a test
// tell such an input apart from a real disagreement. It is read from the
// reference engine's own tensors, so ds4 has no say in it.
#pragma once

#include <ggml-backend.h>
#include <ggml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ds4::oracle_tools {

class SelectionMargins {
public:
    // ggml_backend_sched_eval_callback: asks for the tensors above, copies
    // them when computed.
    static bool observe(ggml_tensor* t, bool ask, void* self) {
        return static_cast<SelectionMargins*>(self)->on_tensor(t, ask);
    }

    // One line per position: `POSITION MARGIN SITE` with the smallest margin
    // over every selection that position went through (SITE names it, e.g.
    // `lid_score_masked-2`); `inf` where no selection was ambiguous in kind
    // (fewer candidates than k, or no scored selection at all).
    void write(const std::string& path, size_t n_tokens) const {
        if (!error_.empty()) throw std::runtime_error(error_);
        std::vector<double> margin(n_tokens, std::numeric_limits<double>::infinity());
        std::vector<std::string> site(n_tokens, "-");
        for (const auto& [name, scores] : scores_) {
            const int64_t k = width_for(name);
            if (k <= 0) continue;
            if (scores.rows != n_tokens) {
                throw std::runtime_error("selection scores " + name + " have " + std::to_string(scores.rows) +
                                         " rows for " + std::to_string(n_tokens) + " tokens");
            }
            for (size_t r = 0; r < scores.rows; ++r) {
                const double m = row_margin(scores.values.data() + r * scores.cols, scores.cols, size_t(k));
                if (m < margin[r]) {
                    margin[r] = m;
                    site[r] = name;
                }
            }
        }
        FILE* f = std::fopen(path.c_str(), "w");
        if (f == nullptr) throw std::runtime_error("cannot create " + path + ": " + std::strerror(errno));
        for (size_t r = 0; r < n_tokens; ++r) std::fprintf(f, "%zu %.9g %s\n", r, margin[r], site[r].c_str());
        if (std::fclose(f) != 0) throw std::runtime_error("cannot write " + path);
    }

private:
    struct Scores {
        size_t rows = 0, cols = 0;
        std::vector<float> values;
    };

    static std::string layer_of(const std::string& name) { return name.substr(name.rfind('-') + 1); }

    bool on_tensor(ggml_tensor* t, bool ask) {
        const std::string name = ggml_get_name(t);
        // glm-dsa names several steps `indexer_score`; the masked scores the
        // top-k reads are computed last and overwrite the others.
        const bool scores = name.starts_with("lid_score_masked-") || name.starts_with("ffn_moe_probs-") ||
                            name.starts_with("ffn_moe_probs_biased-") || name.starts_with("indexer_score-");
        const bool width =
            name.starts_with("lid_top_k-") || name.starts_with("ffn_moe_topk-") || name.starts_with("top_k-");
        const bool scored_routing = name.starts_with("ffn_moe_argsort-");
        if (ask) return scores || width || scored_routing;
        if (width) widths_[name] = t->ne[0];
        if (scored_routing) scored_routing_.insert(layer_of(name));
        if (scores) {
            // No exception may cross ggml's C frames: remember, report in write().
            if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t)) {
                error_ = "selection scores " + name + " are not a contiguous F32 tensor";
                return true;
            }
            Scores s;
            s.cols = size_t(t->ne[0]);
            s.rows = size_t(ggml_nelements(t)) / s.cols;
            s.values.resize(size_t(ggml_nelements(t)));
            ggml_backend_tensor_get(t, s.values.data(), 0, ggml_nbytes(t));
            scores_[name] = std::move(s);
        }
        return true;
    }

    // k for a score tensor, or 0 when that tensor decided nothing: the
    // router's unbiased probabilities where a biased copy exists (the biased
    // one is what was ranked), and any router layer that was hash-routed.
    int64_t width_for(const std::string& name) const {
        const std::string layer = layer_of(name);
        auto width = [&](const std::string& key) {
            const auto it = widths_.find(key + "-" + layer);
            return it == widths_.end() ? int64_t(0) : it->second;
        };
        if (name.starts_with("lid_score_masked-")) return width("lid_top_k");
        if (name.starts_with("indexer_score-")) {
            for (const auto& [key, w] : widths_)
                if (key.starts_with("top_k-")) return w;
            return 0;
        }
        if (!scored_routing_.count(layer)) return 0;
        if (name.starts_with("ffn_moe_probs-") && scores_.count("ffn_moe_probs_biased-" + layer)) return 0;
        return width("ffn_moe_topk");
    }

    static double row_margin(const float* row, size_t n, size_t k) {
        std::vector<float> v;
        v.reserve(n);
        for (size_t i = 0; i < n; ++i)
            if (std::isfinite(row[i])) v.push_back(row[i]);
        if (v.size() <= k) return std::numeric_limits<double>::infinity();
        std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(k), v.end(), std::greater<float>());
        const float next = v[k];
        const float kth = *std::min_element(v.begin(), v.begin() + std::ptrdiff_t(k));
        double scale = 0;
        for (float x : v) scale = std::max(scale, std::fabs(double(x)));
        return scale > 0 ? (double(kth) - double(next)) / scale : 0.0;
    }

    std::map<std::string, Scores> scores_;
    std::map<std::string, int64_t> widths_;
    std::set<std::string> scored_routing_;
    std::string error_;
};

}  // namespace ds4::oracle_tools
