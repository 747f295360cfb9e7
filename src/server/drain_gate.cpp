#include "server/drain_gate.h"

namespace ds4 {

bool DrainGate::enter() {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    ++in_flight_;
    return true;
}

void DrainGate::leave() {
    std::lock_guard<std::mutex> lock(mu_);
    if (in_flight_ > 0 && --in_flight_ == 0) idle_.notify_all();
}

void DrainGate::close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
}

bool DrainGate::closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
}

int DrainGate::in_flight() const {
    std::lock_guard<std::mutex> lock(mu_);
    return in_flight_;
}

bool DrainGate::wait_idle_until(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return idle_.wait_until(lock, deadline, [&] { return in_flight_ == 0; });
}

}  // namespace ds4
