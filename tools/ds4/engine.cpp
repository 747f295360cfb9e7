#include "engine.h"

#include <cstdio>

#include "common/error.h"

namespace ds4 {

Engine load_engine(const Ds4Options& opts) {
    if (opts.backend != "cpu")
        throw Error("backend '" + opts.backend + "' is not available in this build yet; use --backend cpu.");
    if (!opts.role.empty())
        throw Error("--role " + opts.role + " needs the distributed pipeline, which this build does not include yet.");
    if (opts.ssd_streaming)
        throw Error("--ssd-streaming is not available in this build yet.");
    if (opts.layers_spec)
        throw Error("--layers runs a layer slice as a pipeline stage, which this build does not include yet.");

    Engine e;
    e.file = GgufFile::open(opts.model);
    e.map = ModelMap::build(*e.file, MapSelection{});
    std::fprintf(stderr, "%s\n", e.map->summary().c_str());
    e.model = load_model(*e.file, *e.map);
    e.backend = make_cpu_backend(opts.threads);
    return e;
}

}  // namespace ds4
