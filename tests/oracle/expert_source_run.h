// One engine run for the weight-source tests (expert cache, expert windows):
// the prompt's logits at every position in prefill chunks, then greedy
// decode steps' logits, and whether the model map holds a routed expert
// (selected, not merely inside a region's bytes: a tiny file's small expert
// tensors may sit in a gap that coalescing maps anyway).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "mapping/model_map.h"
#include "models/family.h"

namespace ds4::oracle {

struct GreedyRun {
    std::vector<float> logits;  // every prefill position, then each decode step's
    std::vector<int32_t> generated;
    bool map_holds_an_expert = false;
};

// Runs on `engine`; `inspect(engine)` may read its source's state after.
template <class Inspect>
GreedyRun greedy_run(const EngineOptions& o, const std::vector<int32_t>& prompt, int64_t chunk, int n_decode,
                     Inspect&& inspect) {
    const auto engine = ds4::Engine::open(o);
    SessionOptions so;
    so.n_ctx = int64_t(prompt.size()) + n_decode + 1;
    so.prefill_chunk = chunk;
    const auto s = engine->new_session(so);
    GreedyRun r;
    r.logits = s->eval(prompt, true);
    const int64_t V = engine->info().n_vocab;
    for (int i = 0; i < n_decode; ++i) {
        const float* last = r.logits.data() + r.logits.size() - size_t(V);
        const auto next = int32_t(std::max_element(last, last + V) - last);
        r.generated.push_back(next);
        const auto l = s->eval(std::vector<int32_t>{next}, false);
        r.logits.insert(r.logits.end(), l.begin(), l.end());
    }
    inspect(*engine);
    const auto& tensors = engine->file().tensors();
    for (const Region& region : engine->map().regions())
        for (const size_t t : region.tensors)
            if (tensor_role(tensors[t].name) == TensorRole::RoutedExperts) r.map_holds_an_expert = true;
    return r;
}

}  // namespace ds4::oracle
