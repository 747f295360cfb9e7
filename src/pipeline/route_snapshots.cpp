// A coordinator's snapshot of a sequence covers the whole route: each
// worker is asked for its slot's state (Snapshot) and, when the snapshot is
// restored, given it back (Restore). A worker answers only for the sequence
// it holds at exactly that position and refuses a part of another slice or
// model; either way the coordinator loses nothing but time: a snapshot
// without the route's parts, or a refused restore, ends in the history
// replayed through the route on the next step (SlotPool::step).
#include <chrono>

#include "common/log.h"
#include "pipeline/activations.h"
#include "pipeline/remote_stages.h"
#include "pipeline/route.h"
#include "pipeline/transport.h"

namespace ds4 {

namespace {
// A long context's state runs to hundreds of MB per stage; a dead peer is
// still noticed within seconds through keepalive.
constexpr std::chrono::minutes kSnapshotDeadline{5};
}  // namespace

std::vector<RouteStatePart> RemoteStages::snapshot_route(int slot, int64_t n_past, uint64_t prefix_hash) {
    std::vector<RouteStatePart> parts;
    try {
        for (const wire::Hop& hop : hops_()) {
            wire::SnapshotRequest req;
            req.set_protocol(kPipelineProtocol);
            req.set_slot(slot);
            req.set_n_past(n_past);
            req.set_prefix_hash(prefix_hash);
            grpc::ClientContext ctx;
            ctx.set_deadline(std::chrono::system_clock::now() + kSnapshotDeadline);
            authenticate_call(ctx, key_, "Snapshot");
            wire::SnapshotReply reply;
            const grpc::Status st = stub(hop.address()).Snapshot(&ctx, req, &reply);
            if (!st.ok()) throw Error(describe_stage_failure(hop, st));
            const wire::SlotState& s = reply.state();
            if (s.n_past() != n_past || s.slice().begin() != hop.slice().begin() || s.slice().end() != hop.slice().end())
                throw Error("the worker at " + hop.address() + " sent the state of another slice or position.");
            RouteStatePart part{s.slice().begin(), s.slice().end(), s.model_id(), {}};
            for (const std::string& t : s.tensors()) {
                if (!state_tensor_from_bytes(t, part.tensors.emplace_back()))
                    throw Error("the worker at " + hop.address() + " sent a torn tensor.");
            }
            parts.push_back(std::move(part));
        }
    } catch (const Error& e) {
        if (!snapshot_warned_.exchange(true))
            log_warning(std::string("pipeline: prefix snapshots hold this process's layers only: ") + e.what());
        return {};
    }
    return parts;
}

std::string RemoteStages::restore_route(int slot, int n_slots, int64_t n_ctx, std::span<const int32_t> tokens,
                                        uint64_t prefix_hash, const std::vector<RouteStatePart>& parts) {
    try {
        const std::vector<wire::Hop> route = hops_();
        if (route.size() != parts.size())
            return "the KV snapshot holds " + std::to_string(parts.size()) + " later stages' state, the route has " +
                   std::to_string(route.size()) + " stages now.";
        for (size_t i = 0; i < route.size(); ++i) {
            const RouteStatePart& part = parts[i];
            wire::RestoreRequest req;
            req.set_protocol(kPipelineProtocol);
            req.set_slot(slot);
            req.set_n_slots(n_slots);
            req.set_n_ctx(n_ctx);
            req.set_routed(i + 1 < route.size());
            req.set_activation_bits(bits_);
            req.mutable_tokens()->Add(tokens.begin(), tokens.end());
            req.set_prefix_hash(prefix_hash);
            wire::SlotState& s = *req.mutable_state();
            s.mutable_slice()->set_begin(part.begin);
            s.mutable_slice()->set_end(part.end);
            s.set_model_id(part.model_id);
            s.set_n_past(static_cast<int64_t>(tokens.size()));
            for (const auto& t : part.tensors)
                s.add_tensors(reinterpret_cast<const char*>(t.data()), t.size() * sizeof(float));
            grpc::ClientContext ctx;
            ctx.set_deadline(std::chrono::system_clock::now() + kSnapshotDeadline);
            authenticate_call(ctx, key_, "Restore");
            wire::RestoreReply reply;
            const grpc::Status st = stub(route[i].address()).Restore(&ctx, req, &reply);
            if (!st.ok()) return describe_stage_failure(route[i], st);
        }
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace ds4
