#include "pipeline/worker.h"

#include <grpcpp/grpcpp.h>

#include <random>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "engine/engine.h"
#include "gguf/gguf_file.h"
#include "models/family.h"
#include "pipeline.grpc.pb.h"
#include "mapping/model_identity.h"
#include "pipeline/route.h"
#include "pipeline/stage_service.h"
#include "pipeline/transport.h"

namespace ds4 {

namespace {
std::string random_id() {
    std::random_device rd;
    char buf[40];
    std::snprintf(buf, sizeof buf, "%08x%08x%08x", rd(), rd(), rd());
    return buf;
}
}  // namespace

int run_worker(const Engine& engine, const WorkerConfig& config, const std::atomic<bool>& stop) {
    const ModelInfo& info = engine.info();
    if (info.layers.has_embedding())
        throw Error("a worker's --layers start after block 0 (the coordinator embeds the tokens).");
    if (info.layers.head_apart(info.n_layer))
        throw Error("a worker holds the output head only with the model's last block (--layers A:output); "
                    "the head apart from the last blocks is the coordinator's (--layers 0:B,output).");
    wire::Registration reg;
    reg.set_protocol(kPipelineProtocol);
    *reg.mutable_slice() = make_slice(info.layers, info.n_layer);
    reg.set_model_id(model_identity(engine.file()));
    reg.set_arch(info.arch);
    reg.set_quant(std::to_string(engine.file().get_uint("general.file_type").value_or(0)));
    reg.set_n_ctx(config.max_ctx);
    reg.set_max_slots(engine.model().max_slots());
    reg.set_worker_id(random_id());

    const std::string bind = config.listen_host + ":" + std::to_string(config.listen_port);
    grpc::ServerBuilder builder;
    configure_pipeline_server(builder);
    int port = 0;
    builder.AddListeningPort(bind, pipeline_server_credentials(config.tls.get()), &port);
    StageConfig sc;
    sc.key = config.key;
    sc.tls = config.tls;
    sc.max_ctx = config.max_ctx;
    sc.debug = config.debug;
    StageService service(engine, sc);
    builder.RegisterService(&service);
    std::unique_ptr<grpc::ServerCompletionQueue> streams_cq = builder.AddCompletionQueue();
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (!server || port == 0) throw Error("the worker cannot listen on " + bind + " (address in use or not local).");
    // The step streams' thread, stopped in this order on every way out:
    // no more operations, the server's calls cancelled, the queue drained.
    std::thread streams([&] { service.serve_streams(*streams_cq); });
    struct StopStreams {
        StageService& service;
        grpc::Server& server;
        grpc::ServerCompletionQueue& cq;
        std::thread& thread;
        ~StopStreams() {
            service.stop_streams();
            server.Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
            cq.Shutdown();
            thread.join();
        }
    } stop_streams{service, *server, *streams_cq, streams};
    // Known once bound (port 0 picks one); no step comes before registration.
    const std::string address = config.listen_host + ":" + std::to_string(port);
    service.set_address(address);
    reg.set_address(address);
    log_info("pipeline: worker serving " + describe_slice(reg.slice()) + " on " + address + (config.tls ? " (TLS)" : ""));

    const std::string coordinator = config.coordinator_host + ":" + std::to_string(config.coordinator_port);
    auto stub = wire::Coordinator::NewStub(pipeline_channel(coordinator, config.tls.get()));
    enum class Link { unknown, waiting, registered } link = Link::unknown;
    while (!stop.load()) {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
        authenticate_call(ctx, config.key, "Register");
        wire::RegisterReply reply;
        const grpc::Status st = stub->Register(&ctx, reg, &reply);
        if (st.error_code() == grpc::StatusCode::UNAUTHENTICATED)
            throw Error("the coordinator at " + coordinator + " refused this worker: " + st.error_message());
        if (st.ok() && !reply.accepted())
            throw Error("the coordinator at " + coordinator + " refused this worker: " + reply.reason());
        if (st.ok() && link != Link::registered) {
            log_info("pipeline: registered with the coordinator at " + coordinator);
            link = Link::registered;
        } else if (!st.ok() && link != Link::waiting) {
            log_info("pipeline: waiting for the coordinator at " + coordinator + " (" + st.error_message() + ")");
            link = Link::waiting;
        }
        for (int i = 0; i < 10 && !stop.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;  // stop_streams shuts the server down
}

}  // namespace ds4
