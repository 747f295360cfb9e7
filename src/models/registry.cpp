#include "common/error.h"
#include "models/family.h"
#include "models/deepseek4/deepseek4.h"
#include "models/glm_dsa/glm_dsa.h"
#include "models/qwen3moe/qwen3moe.h"

namespace ds4 {

namespace {
struct FamilyEntry {
    const char* arch;
    std::unique_ptr<Model> (*load)(const GgufFile&, ModelMap&, const LoadOptions&);
};
constexpr FamilyEntry kFamilies[] = {
    {"qwen3moe", load_qwen3moe},
    {"deepseek4", load_deepseek4},
    {"glm-dsa", load_glm_dsa},
};
}  // namespace

std::vector<std::string> supported_architectures() {
    std::vector<std::string> v;
    for (const auto& f : kFamilies) v.emplace_back(f.arch);
    return v;
}

void check_stage_input(const ModelInfo& info, const Tensor* hidden_in, int64_t n, int64_t cols) {
    const std::string stage = "the stage running layers " + info.layers.spelling(info.n_layer);
    if (info.layers.has_embedding() && hidden_in)
        throw Error(stage + " embeds the tokens itself and takes no hidden state.");
    if (!info.layers.has_embedding() && !hidden_in)
        throw Error(stage + " continues from the previous stage's hidden state, which was not given.");
    if (hidden_in && (hidden_in->rows != n || hidden_in->cols != cols))
        throw Error(stage + " takes a hidden state of " + std::to_string(n) + " x " + std::to_string(cols) +
                    " values, not " + std::to_string(hidden_in->rows) + " x " + std::to_string(hidden_in->cols) + ".");
}

void check_owns_head(const ModelInfo& info) {
    if (!info.layers.has_output(info.n_layer))
        throw Error("the stage running layers " + info.layers.spelling(info.n_layer) +
                    " does not hold the output head (--layers ...:output or A:B,output).");
}

LayerRange layer_range(const LoadOptions& opts, int n_layer, const std::string& path) {
    if (const std::string problem = layer_range_problem(opts.layers, n_layer); !problem.empty())
        throw Error(path + ": layers " + problem + ".");
    return opts.layers.resolved(n_layer);
}

std::unique_ptr<Model> load_model(const GgufFile& file, ModelMap& map, const LoadOptions& opts) {
    const std::string arch = file.architecture();
    for (const auto& f : kFamilies)
        if (arch == f.arch) return f.load(file, map, opts);
    std::string known;
    for (const auto& a : supported_architectures()) known += (known.empty() ? "" : ", ") + a;
    throw Error(file.path() + " has architecture '" + arch + "', which ds4 does not support (supported: " + known + ").");
}

}  // namespace ds4
