// Pipeline stages in one process, for the tests: each stage its own map
// (only its slice; the embedding and the head only where it runs them),
// model and state; a chunked run hands each stage's hidden rows to the next.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "common/layer_range.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"
#include "support/host_batch.h"

namespace ds4::test {

// One stage: its own map (only its slice; embedding and head only where it
// runs them), model and state.
struct Stage {
    std::unique_ptr<ModelMap> map;
    std::unique_ptr<Model> model;
    std::unique_ptr<ModelState> state;
};

inline Stage load_stage(const GgufFile& file, LayerRange range, int n_layer, Backend& be, int64_t n_ctx) {
    Stage s;
    MapSelection sel;
    sel.layers = range;
    sel.embedding = range.has_embedding();
    sel.output = range.has_output(n_layer);
    s.map = ModelMap::build(file, sel);
    LoadOptions lo;
    lo.layers = range;
    s.model = load_model(file, *s.map, lo);
    s.state = s.model->new_state(be, n_ctx);
    return s;
}

// The tokens in chunks through the chain of stages; every row's logits.
inline std::vector<float> run_chain(std::vector<Stage>& stages, Backend& be, const std::vector<int32_t>& tokens, int64_t chunk,
                             int64_t n_ctx) {
    std::vector<float> out;
    for (int64_t at = 0; at < int64_t(tokens.size()); at += chunk) {
        const int64_t n = std::min<int64_t>(chunk, int64_t(tokens.size()) - at);
        const HostBatch hb = sequence_batch(
            be, std::span<const int32_t>(tokens).subspan(size_t(at), size_t(n)), at, n_ctx, /*all_logits=*/true);
        const Batch& b = hb.batch;
        Tensor hidden;
        for (size_t s = 0; s < stages.size(); ++s) {
            hidden = stages[s].model->forward(be, *stages[s].state, b, s == 0 ? nullptr : &hidden);
            if (s + 1 < stages.size()) {
                EXPECT_EQ(hidden.rows, n);
                EXPECT_EQ(hidden.cols, stages[s].model->hidden_cols());
            }
        }
        std::vector<float> l(size_t(hidden.size()));
        be.download(hidden, l.data());
        out.insert(out.end(), l.begin(), l.end());
    }
    return out;
}

}  // namespace ds4::test
