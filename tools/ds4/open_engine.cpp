#include "open_engine.h"

#include "common/error.h"

namespace ds4 {

std::unique_ptr<Engine> open_engine(const Ds4Options& opts) {
    EngineOptions e;
    e.model = opts.model;
    if (opts.layers) e.layers = *opts.layers;
    e.backend.name = opts.backend;
    e.backend.threads = opts.threads;
    e.backend.host_weights = opts.cuda_host_weights;
    e.backend.int8_activations = opts.int8_activations;
    e.backend.exact = opts.exact;
    e.check_tensors = opts.check_tensors;
    e.ssd_streaming = opts.ssd;
    // A worker never renders a conversation: the coordinator sends token ids.
    e.chat = opts.dump_logits_file.empty() && opts.role != "worker";
    e.chat_template = opts.chat_template;
    return Engine::open(e);
}

}  // namespace ds4
