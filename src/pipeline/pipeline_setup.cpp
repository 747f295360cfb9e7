#include "pipeline/pipeline_setup.h"

#include "common/error.h"

namespace ds4 {

PipelineSecrets load_pipeline_secrets(const PipelineFlags& f) {
    PipelineSecrets s;
    if (f.role.empty()) return s;
    try {
        s.key = ClusterKey::load(f.cluster_key_file);
        if (!f.tls_cert.empty()) s.tls = std::make_shared<const TlsPems>(TlsPems::load(f.tls_cert, f.tls_key, f.tls_ca));
    } catch (const UsageError&) {
        throw;
    } catch (const Error& e) {
        throw UsageError(e.what());
    }
    return s;
}

CoordinatorConfig coordinator_config(const PipelineFlags& f, PipelineSecrets secrets, int n_slots, int64_t n_ctx) {
    CoordinatorConfig c;
    c.listen_host = f.listen_host;
    c.listen_port = f.listen_port;
    c.key = std::move(secrets.key);
    c.tls = std::move(secrets.tls);
    c.activation_bits = f.activation_bits;
    c.n_slots = n_slots;
    c.n_ctx = n_ctx;
    c.debug = f.debug;
    return c;
}

WorkerConfig worker_config(const PipelineFlags& f, PipelineSecrets secrets, int64_t max_ctx) {
    WorkerConfig w;
    w.coordinator_host = f.coordinator_host;
    w.coordinator_port = f.coordinator_port;
    if (f.listen_port != 0) {  // else 127.0.0.1, any free port
        w.listen_host = f.listen_host;
        w.listen_port = f.listen_port;
    }
    w.key = std::move(secrets.key);
    w.tls = std::move(secrets.tls);
    w.max_ctx = max_ctx;
    w.debug = f.debug;
    return w;
}

}  // namespace ds4
