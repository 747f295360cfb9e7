#include "pipeline/secrets.h"

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

}  // namespace ds4
