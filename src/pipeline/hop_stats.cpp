#include "pipeline/hop_stats.h"

#include <cstdio>

#include "pipeline/remote_stages.h"
#include "pipeline/route.h"

namespace ds4 {

namespace {
std::string number(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return buf;
}
// A label value: backslash, double quote and newline escaped.
std::string escaped(const std::string& v) {
    std::string s;
    for (char c : v) {
        if (c == '\n') {
            s += "\\n";
            continue;
        }
        if (c == '\\' || c == '"') s += '\\';
        s += c;
    }
    return s;
}
void header(std::string& out, const std::string& name, const char* type, const char* help) {
    out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}
}  // namespace

void HopStats::Histogram::observe(double seconds) {
    for (size_t i = 0; i < kBuckets.size(); ++i)
        if (seconds <= kBuckets[i]) {
            ++counts[i];
            break;
        }
    ++count;
    sum += seconds;
}

void HopStats::record(const RouteTelemetry& t) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < t.hops.size(); ++i) {
        const wire::HopTelemetry& h = t.hops[i];
        Hop& s = hops_[Key{i, i == 0 ? "coordinator" : h.address(), i == 0 ? self_layers_ : describe_slice(h.slice())}];
        ++s.steps;
        s.rows += static_cast<uint64_t>(h.rows());
        s.bytes_in += h.bytes_in();
        s.bytes_out += h.bytes_out();
        s.eval.observe(h.eval_ms() / 1000);
        s.wait.observe(h.wait_ms() / 1000);
        s.send.observe(h.send_ms() / 1000);
    }
}

std::string HopStats::prometheus() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (hops_.empty()) return "";
    auto labels = [](const Key& k) {
        return "hop=\"" + std::to_string(std::get<0>(k)) + "\",address=\"" + escaped(std::get<1>(k)) + "\",layers=\"" +
               escaped(std::get<2>(k)) + "\"";
    };
    std::string out;
    auto counter = [&](const char* name, const char* help, uint64_t Hop::*field) {
        header(out, name, "counter", help);
        for (const auto& [k, s] : hops_) out += std::string(name) + "{" + labels(k) + "} " + std::to_string(s.*field) + "\n";
    };
    counter("ds4_pipeline_hop_steps_total", "Steps this hop of the pipeline route ran.", &Hop::steps);
    counter("ds4_pipeline_hop_tokens_total", "Token rows this hop of the pipeline route ran.", &Hop::rows);
    counter("ds4_pipeline_hop_bytes_in_total", "Activation bytes this hop received (hop 0: logits or candidate tokens back).",
            &Hop::bytes_in);
    counter("ds4_pipeline_hop_bytes_out_total", "Activation bytes this hop sent on.", &Hop::bytes_out);
    auto histogram = [&](const char* name, const char* help, Histogram Hop::*field) {
        header(out, name, "histogram", help);
        for (const auto& [k, s] : hops_) {
            const Histogram& h = s.*field;
            uint64_t cum = 0;
            for (size_t i = 0; i < kBuckets.size(); ++i) {
                cum += h.counts[i];
                out += std::string(name) + "_bucket{" + labels(k) + ",le=\"" + number(kBuckets[i]) + "\"} " +
                       std::to_string(cum) + "\n";
            }
            out += std::string(name) + "_bucket{" + labels(k) + ",le=\"+Inf\"} " + std::to_string(h.count) + "\n";
            out += std::string(name) + "_sum{" + labels(k) + "} " + number(h.sum) + "\n";
            out += std::string(name) + "_count{" + labels(k) + "} " + std::to_string(h.count) + "\n";
        }
    };
    histogram("ds4_pipeline_hop_eval_seconds", "Time this hop spent on its own layers per step.", &Hop::eval);
    histogram("ds4_pipeline_hop_downstream_wait_seconds",
              "Time this hop waited for the rest of the route per step.", &Hop::wait);
    histogram("ds4_pipeline_hop_send_seconds", "Time this hop spent encoding its output per step.", &Hop::send);
    return out;
}

}  // namespace ds4
