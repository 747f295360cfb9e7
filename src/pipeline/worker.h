// A pipeline worker: serves its layer slice (the Stage service) and keeps
// itself registered with the coordinator (a registration every second is
// also the heartbeat, and finds a restarted coordinator again).
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "pipeline/cluster_key.h"

namespace ds4 {

class Engine;

struct WorkerConfig {
    std::string coordinator_host;
    int coordinator_port = 0;
    std::string listen_host = "127.0.0.1";  // where the previous stage reaches this one
    int listen_port = 0;                    // 0: any free port
    std::optional<ClusterKey> key;
    int64_t max_ctx = 4096;  // positions per sequence this worker accepts (--ctx)
    bool debug = false;
};

// Serves until `stop` becomes true (then returns 0). Throws ds4::Error when
// the address cannot be bound or the coordinator refuses this worker (wrong
// cluster key, another model file, an overlapping slice): that sentence.
int run_worker(const Engine& engine, const WorkerConfig& config, const std::atomic<bool>& stop);

}  // namespace ds4
