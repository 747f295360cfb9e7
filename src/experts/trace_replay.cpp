#include "experts/trace_replay.h"

namespace ds4 {

namespace {

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

}  // namespace

double ReplayResult::device_hit_rate() const { return ratio(double(counts.hits), double(counts.lookups)); }
double ReplayResult::host_hit_rate() const { return ratio(double(counts.host_hits), double(counts.lookups)); }
double ReplayResult::hit_rate() const { return ratio(double(counts.hits + counts.host_hits), double(counts.lookups)); }
double ReplayResult::misses_per_token() const { return ratio(double(counts.misses), double(tokens)); }
double ReplayResult::disk_reads_per_token() const {
    return ratio(double(counts.misses - counts.host_hits), double(tokens));
}

ReplayResult replay_trace(const RoutingTrace& trace, const ReplayOptions& options) {
    CachePolicyOptions po;
    po.slots = options.device_slots;
    po.experts_per_token = trace.experts_per_token;
    po.host_slots = options.host_slots;
    po.half_life_steps = options.half_life_steps;
    po.prefill = options.prefill;
    CachePolicy policy(trace.blocks, po);
    // What ExpertCache does around the policy, minus the bytes: a tier
    // that holds every expert is filled at start; each step is planned,
    // and its misses pass through the host tier unless the block is read
    // whole.
    if (policy.host_slots() > 0 && policy.host_slots() >= policy.total_experts()) policy.fill_host(nullptr);
    ReplayResult r;
    for (size_t i = 0; i < trace.routes.size(); ++i) {
        const TraceRoute& t = trace.routes[i];
        const SlotPlan plan = policy.plan(t.layer, trace.route_ids(i), t.rows);
        if (plan.whole) {
            ++r.whole_steps;
            continue;
        }
        policy.plan_host(t.layer, plan.loads);
    }
    r.counts = policy.counts();
    r.routes = trace.routes.size();
    r.tokens = trace.tokens();
    r.total_experts = policy.total_experts();
    r.device_slots = policy.slots();
    r.scratch_slots = policy.scratch_slots();
    r.host_slots = policy.host_slots();
    return r;
}

}  // namespace ds4
