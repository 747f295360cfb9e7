#include "engine.h"

#include <cstdio>

#include "common/error.h"
#include "models/check_tensors.h"
#include "runtime/chat_prompt.h"
#ifdef DS4_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace ds4 {

Engine load_engine(const Ds4Options& opts) {
    if (opts.backend != "cpu" && opts.backend != "cuda")
        throw Error("backend '" + opts.backend + "' is not available in this build yet; use --backend cpu.");
#ifndef DS4_HAVE_CUDA
    if (opts.backend == "cuda")
        throw Error("this ds4 was built without CUDA (configure with -DDS4_CUDA=ON); use --backend cpu.");
#endif
    if (!opts.role.empty())
        throw Error("--role " + opts.role + " needs the distributed pipeline, which this build does not include yet.");
    if (opts.ssd_streaming)
        throw Error("--ssd-streaming is not available in this build yet.");
    if (opts.layers_spec)
        throw Error("--layers runs a layer slice as a pipeline stage, which this build does not include yet.");

    Engine e;
    // The backend first: no GPU is a one-sentence failure before the model is read.
#ifdef DS4_HAVE_CUDA
    if (opts.backend == "cuda") e.backend = make_cuda_backend(CudaOptions{0, opts.cuda_host_weights});
#endif
    if (!e.backend) e.backend = make_cpu_backend(opts.threads);
    e.file = GgufFile::open(opts.model);
    // The chat template before the weights: a model ds4 cannot talk to fails
    // at once, not after the whole model is loaded (or uploaded to a GPU).
    if (opts.dump_logits_file.empty()) {
        const ChatTemplateChoice choice = choose_chat_template(*e.file, opts.chat_template);
        if (!choice.warning.empty()) std::fprintf(stderr, "ds4: %s\n", choice.warning.c_str());
        e.chat_template = choice.name;
    }
    e.map = ModelMap::build(*e.file, MapSelection{});
    e.model = load_model(*e.file, *e.map);
    TensorCheckStats checked;
    if (opts.check_tensors) checked = check_tensor_values(*e.file, *e.map, MapSelection{}, opts.threads);
    // Printed once the model is known good: a file that fails to load gets
    // the loader's sentence alone.
    std::fprintf(stderr, "%s\n", e.map->summary().c_str());
    if (opts.check_tensors)
        std::fprintf(stderr, "check-tensors: %llu tensors (%.2f GiB), every value finite\n",
                     static_cast<unsigned long long>(checked.tensors),
                     static_cast<double>(checked.bytes) / double(uint64_t{1} << 30));
    e.backend->attach_weights(*e.map);
    return e;
}

}  // namespace ds4
