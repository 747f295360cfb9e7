// A worker's side of snapshots across the route (route_snapshots.cpp has
// the coordinator's): it gives its slot's state for the sequence it holds at
// exactly the asked position, and takes a part back only when it names this
// worker's slice and model file; anything else is refused, so a route that
// changed since a snapshot was written replays instead of restoring state
// another slice computed.

#include "common/error.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/token_history.h"
#include "pipeline/activations.h"
#include "pipeline/route.h"
#include "pipeline/stage_service.h"
#include "pipeline/transport.h"

namespace ds4 {

namespace {
grpc::Status refuse(const std::string& why) { return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, why); }
}  // namespace

grpc::Status StageService::Snapshot(grpc::ServerContext* ctx, const wire::SnapshotRequest* req,
                                    wire::SnapshotReply* reply) {
    if (grpc::Status auth = check_call(*ctx, config_.key, "Snapshot"); !auth.ok()) {
        log_warning("refused a snapshot call from " + ctx->peer() + ": " + auth.error_message());
        return auth;
    }
    if (req->protocol() != kPipelineProtocol)
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the coordinator speaks pipeline protocol " +
                                                                    std::to_string(req->protocol()) + ", this worker " +
                                                                    std::to_string(kPipelineProtocol) + ".");
    try {
        std::lock_guard<std::mutex> lock(mu_);  // between steps: the slot does not move meanwhile
        const int slot = req->slot();
        if (!pool_ || slot < 0 || slot >= pool_->n_slots() || pool_->n_past(slot) != req->n_past() ||
            pool_->prefix_hash(slot, req->n_past()) != req->prefix_hash())
            return refuse("the worker at " + config_.address + " does not hold that sequence at position " +
                          std::to_string(req->n_past()) + ".");
        const SlotSnapshot snap = pool_->snapshot(slot);
        wire::SlotState& s = *reply->mutable_state();
        *s.mutable_slice() = slice_;
        s.set_model_id(model_id_);
        s.set_n_past(snap.n_past);
        for (const auto& t : snap.tensors) s.add_tensors(reinterpret_cast<const char*>(t.data()), t.size() * sizeof(float));
        return grpc::Status::OK;
    } catch (const Error& e) {
        return grpc::Status(grpc::StatusCode::ABORTED, e.what());
    } catch (const std::bad_alloc&) {
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "the worker at " + config_.address + " ran out of memory.");
    }
}

grpc::Status StageService::Restore(grpc::ServerContext* ctx, const wire::RestoreRequest* req, wire::RestoreReply*) {
    if (grpc::Status auth = check_call(*ctx, config_.key, "Restore"); !auth.ok()) {
        log_warning("refused a restore call from " + ctx->peer() + ": " + auth.error_message());
        return auth;
    }
    if (req->protocol() != kPipelineProtocol)
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "the coordinator speaks pipeline protocol " +
                                                                    std::to_string(req->protocol()) + ", this worker " +
                                                                    std::to_string(kPipelineProtocol) + ".");
    const wire::SlotState& s = req->state();
    if (s.slice().begin() != slice_.begin() || s.slice().end() != slice_.end())
        return refuse("the worker at " + config_.address + " serves " + describe_slice(slice_) +
                      ", the KV snapshot's part was written by " + describe_slice(s.slice()) + ".");
    if (s.model_id() != model_id_)
        return refuse("the worker at " + config_.address + " serves another model file (identity " + model_id_ +
                      ") than the KV snapshot's part (" + s.model_id() + ").");
    const std::vector<int32_t> tokens(req->tokens().begin(), req->tokens().end());
    if (s.n_past() != static_cast<int64_t>(tokens.size()) || TokenHistory::extend(TokenHistory::kEmpty, tokens) != req->prefix_hash())
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a restore whose tokens do not match its hash.");
    if (std::string why = check_shape(req->n_slots(), req->n_ctx()); !why.empty())
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
    if (req->slot() < 0 || req->slot() >= req->n_slots())
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "a restore names sequence slot " +
                                                                    std::to_string(req->slot()) + ".");
    try {
        SlotSnapshot snap;
        snap.n_past = s.n_past();
        snap.tokens = tokens;
        for (const std::string& t : s.tensors()) {
            if (!state_tensor_from_bytes(t, snap.tensors.emplace_back()))
                return refuse("a KV snapshot part with a torn tensor.");
        }
        std::lock_guard<std::mutex> lock(mu_);
        SlotPool& pool = pool_for(req->n_slots(), req->n_ctx(), req->routed(), req->activation_bits());
        pool.restore(req->slot(), snap);  // checks every tensor's size against this state
        if (config_.debug)
            log_info("restored sequence slot " + std::to_string(req->slot()) + " at " + std::to_string(snap.n_past) +
                     " positions from a KV snapshot");
        return grpc::Status::OK;
    } catch (const Error& e) {
        return refuse("the worker at " + config_.address + " cannot take the KV snapshot's part: " + e.what());
    } catch (const std::bad_alloc&) {
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "the worker at " + config_.address + " ran out of memory.");
    }
}

}  // namespace ds4
