#include "pipeline/coordinator.h"

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "pipeline/hop_stats.h"
#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "models/family.h"
#include "pipeline.grpc.pb.h"
#include "mapping/model_identity.h"
#include "pipeline/remote_stages.h"
#include "pipeline/transport.h"

namespace ds4 {

class Coordinator::Registrar final : public wire::Coordinator::Service {
public:
    Registrar(Coordinator& c) : c_(c) {}

    grpc::Status Register(grpc::ServerContext* ctx, const wire::Registration* r, wire::RegisterReply* reply) override {
        if (grpc::Status auth = check_call(*ctx, c_.config_.key, "Register"); !auth.ok()) {
            warn_once(ctx->peer() + "|auth", "refused a worker at " + ctx->peer() + ": " + auth.error_message());
            return auth;
        }
        const std::string why = check(*r);
        reply->set_accepted(why.empty());
        reply->set_reason(why);
        if (!why.empty()) {
            warn_once(r->worker_id() + why, "refused the worker at " + r->address() + ": " + why);
            return grpc::Status::OK;
        }
        std::lock_guard<std::mutex> lock(mu_);
        if (known_.insert(r->worker_id()).second)
            log_info("pipeline: worker " + r->address() + " registered (" + describe_slice(r->slice()) + ")");
        return grpc::Status::OK;
    }

private:
    std::string check(const wire::Registration& r) {
        if (r.protocol() != kPipelineProtocol)
            return "it speaks pipeline protocol " + std::to_string(r.protocol()) + ", this coordinator " +
                   std::to_string(kPipelineProtocol) + ".";
        if (r.model_id() != c_.model_id_ || r.arch() != c_.arch_)
            return "it serves another model file (" + r.arch() + ", identity " + r.model_id() + ") than this " +
                   "coordinator's " + c_.model_path_ + " (" + c_.arch_ + ", identity " + c_.model_id_ + ").";
        if (r.n_ctx() < c_.config_.n_ctx)
            return "it holds " + std::to_string(r.n_ctx()) + " positions per sequence and the coordinator needs " +
                   std::to_string(c_.config_.n_ctx) + " (start it with --ctx " + std::to_string(c_.config_.n_ctx) +
                   ").";
        if (r.max_slots() < c_.config_.n_slots)
            return "it runs " + std::to_string(r.max_slots()) + " sequences at once and the coordinator " +
                   std::to_string(c_.config_.n_slots) + ".";
        if (r.address().empty()) return "it did not say where it serves.";
        return c_.table_->add(r);
    }
    void warn_once(const std::string& key, const std::string& line) {
        std::lock_guard<std::mutex> lock(mu_);
        if (warned_.insert(key).second) log_warning("pipeline: " + line);
    }
    Coordinator& c_;
    std::mutex mu_;
    std::set<std::string> known_, warned_;
};

namespace {
void log_telemetry(const RouteTelemetry& t) {
    for (size_t i = 0; i < t.hops.size(); ++i) {
        const wire::HopTelemetry& h = t.hops[i];
        char line[320];
        std::snprintf(line, sizeof line,
                      "pipeline: step %llu hop %zu %s%s%s: %lld rows, eval %.2f ms, wait %.2f ms, send %.2f ms, "
                      "in %llu B, out %llu B",
                      static_cast<unsigned long long>(t.request_id), i, i == 0 ? "coordinator" : h.address().c_str(),
                      i == 0 ? "" : " ", i == 0 ? "" : ("(" + describe_slice(h.slice()) + ")").c_str(),
                      static_cast<long long>(h.rows()), h.eval_ms(), h.wait_ms(), h.send_ms(),
                      static_cast<unsigned long long>(h.bytes_in()), static_cast<unsigned long long>(h.bytes_out()));
        log_info(line);
    }
}
}  // namespace

Coordinator::Coordinator(const Engine& engine, CoordinatorConfig config)
    : config_(std::move(config)), arch_(engine.info().arch), model_path_(engine.file().path()) {
    const ModelInfo& info = engine.info();
    if (info.layers.has_last_block(info.n_layer))
        throw Error("the coordinator's --layers reach the model's last block: no worker would have anything to run.");
    model_id_ = model_identity(engine.file());
    // With --layers 0:B,output the head is this process's: the last worker
    // returns its final hidden rows and the slot pool applies the head.
    const bool head_here = info.layers.has_output(info.n_layer);
    table_ = std::make_unique<RouteTable>(info.n_layer, info.layers.end_of(info.n_layer), head_here);
    registrar_ = std::make_unique<Registrar>(*this);
    grpc::ServerBuilder builder;
    configure_pipeline_server(builder);
    int port = 0;
    const std::string address = config_.listen_host + ":" + std::to_string(config_.listen_port);
    builder.AddListeningPort(address, pipeline_server_credentials(config_.tls.get()), &port);
    builder.RegisterService(registrar_.get());
    server_ = builder.BuildAndStart();
    if (!server_ || port == 0)
        throw Error("the coordinator cannot listen on " + address + " (address in use or not local).");
    port_ = port;
    log_info("pipeline: coordinator listening on " + config_.listen_host + ":" + std::to_string(port) +
             (config_.tls ? " (TLS)" : "") + ", running " +
             describe_slice(make_slice(info.layers, info.n_layer)));
    RouteTable* table = table_.get();
    RemoteStages::TelemetrySink sink;
    if (config_.debug || config_.hop_stats) {
        std::shared_ptr<HopStats> stats = config_.hop_stats;
        if (stats) stats->set_self_layers(describe_slice(make_slice(info.layers, info.n_layer)));
        sink = [debug = config_.debug, stats](const RouteTelemetry& t) {
            if (debug) log_telemetry(t);
            if (stats) stats->record(t);
        };
    }
    route_ = std::make_shared<RemoteStages>([table] { return table->hops(); }, config_.key, config_.tls,
                                            config_.activation_bits,
                                            RemoteStages::RouteEnd{!head_here,
                                                                   head_here ? engine.model().hidden_cols() : info.n_vocab},
                                            std::move(sink));
}

Coordinator::~Coordinator() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

void Coordinator::wait_for_route() {
    const auto start = std::chrono::steady_clock::now();
    std::string said;
    for (;;) {
        const std::string why = table_->problem();
        if (why.empty()) break;
        if (std::chrono::steady_clock::now() - start > config_.wait_for_workers)
            throw Error(why + " (waited " + std::to_string(config_.wait_for_workers.count()) + " s for workers)");
        if (why != said) log_info(why + " Waiting for workers.");
        said = why;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::string line = "pipeline: route";
    for (const wire::Hop& h : table_->hops()) line += " -> " + h.address() + " (" + describe_slice(h.slice()) + ")";
    log_info(line);
}

}  // namespace ds4
