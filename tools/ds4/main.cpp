// ds4: run a giant MoE model from a GGUF file (one prompt, an interactive
// chat, or the differential --token-ids/--dump-logits interface).
#include <cstdio>
#include <exception>

#include "cli/ds4_options.h"
#include "common/error.h"
#include "dump_logits.h"
#include "open_engine.h"
#include "generate.h"
#include "pipeline_role.h"

int main(int argc, char** argv) {
    ds4::Ds4Options opts;
    try {
        opts = ds4::parse_ds4_options(argc, argv);
    } catch (const ds4::UsageError& e) {
        std::fprintf(stderr, "ds4: %s\n", e.what());
        return 2;
    }
    if (opts.help) {
        std::fputs(ds4::ds4_help_text().c_str(), stdout);
        return 0;
    }
    if (opts.version) {
        std::printf("ds4 %s\n", DS4_VERSION);
        return 0;
    }
    std::optional<ds4::ClusterKey> key;
    try {
        key = ds4::load_cluster_key(opts);
    } catch (const ds4::UsageError& e) {
        std::fprintf(stderr, "ds4: %s\n", e.what());
        return 2;
    }
    try {
        const std::unique_ptr<ds4::Engine> engine = ds4::open_engine(opts);
        if (opts.role == "worker") return ds4::run_worker_role(*engine, opts, std::move(key));
        std::unique_ptr<ds4::Coordinator> coordinator;
        if (opts.role == "coordinator") {
            coordinator = ds4::start_coordinator(*engine, opts, std::move(key));
            if (opts.dist_prefill_chunk > 0) opts.prefill_chunk = opts.dist_prefill_chunk;
        }
        const int rc = !opts.dump_logits_file.empty()                     ? ds4::run_dump_logits(*engine, opts)
                       : opts.has_prompt || !opts.prompt_file.empty() ? ds4::run_prompt(*engine, opts)
                                                                       : ds4::run_interactive(*engine, opts);
        // What the expert cache did (--ssd-streaming): hits, misses, bytes read.
        if (const std::string st = engine->expert_source_stats(); !st.empty()) std::fprintf(stderr, "ds4: %s\n", st.c_str());
        return rc;
    } catch (const ds4::Error& e) {
        std::fprintf(stderr, "ds4: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "ds4: out of memory.\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4: internal error: %s\n", e.what());
        return 1;
    }
}
