// Round-trip latency of one pipeline hop on loopback without ds4 (bench/grpc-hop/run.sh): a unary call per step
// (as Stage.Forward) against one message each way on a long-lived bidirectional stream, the server busy for
// argv[3] microseconds a message. Server and client are separate processes.
// "spinserver" serves the stream from an async completion queue that one thread polls without sleeping, and the
// client's "spin stream" row polls its own queue the same way: what the round trip costs when neither side has
// to be woken (a pipeline stage on a machine with idle cores could afford the spinning thread).
#include <grpcpp/grpcpp.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>
#include "hop.grpc.pb.h"
using namespace std::chrono;
struct Svc final : hopbench::Hop::Service {
  int work_us = 0;
  void busy() { auto t = steady_clock::now(); volatile double x = 0; while (duration<double, std::micro>(steady_clock::now() - t).count() < work_us) x += 1; }
  grpc::Status Unary(grpc::ServerContext*, const hopbench::Msg* in, hopbench::Msg* out) override {
    busy(); out->set_seq(in->seq()); out->set_payload(std::string(8, 'r')); return grpc::Status::OK; }
  grpc::Status Stream(grpc::ServerContext*, grpc::ServerReaderWriter<hopbench::Msg, hopbench::Msg>* s) override {
    hopbench::Msg in, out;
    while (s->Read(&in)) { busy(); out.set_seq(in.seq()); out.set_payload(std::string(8, 'r')); if (!s->Write(out)) break; }
    return grpc::Status::OK; }
};
// The stream served from a completion queue polled in a loop with a zero deadline: no thread sleeps in epoll.
static void spin_until(grpc::CompletionQueue& cq, void* want) {
  void* tag; bool ok;
  for (;;) {
    auto r = cq.AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC));
    if (r == grpc::CompletionQueue::SHUTDOWN) std::exit(1);
    if (r == grpc::CompletionQueue::GOT_EVENT) { if (!ok) std::exit(0); if (tag == want) return; }
  }
}
static int spin_server(const std::string& addr, int work_us) {
  hopbench::Hop::AsyncService svc; grpc::ServerBuilder b; b.AddListeningPort(addr, grpc::InsecureServerCredentials());
  b.RegisterService(&svc); auto cq = b.AddCompletionQueue(); auto srv = b.BuildAndStart();
  Svc busy; busy.work_us = work_us;
  for (;;) {  // one stream at a time, as a stage's hop
    grpc::ServerContext ctx; grpc::ServerAsyncReaderWriter<hopbench::Msg, hopbench::Msg> rw(&ctx);
    int start, rd, wr;
    svc.RequestStream(&ctx, &rw, cq.get(), cq.get(), &start); spin_until(*cq, &start);
    hopbench::Msg in, out;
    for (;;) {
      rw.Read(&in, &rd);
      void* tag; bool ok;
      for (;;) { auto r = cq->AsyncNext(&tag, &ok, gpr_time_0(GPR_CLOCK_MONOTONIC)); if (r == grpc::CompletionQueue::GOT_EVENT) break; }
      if (!ok) break;
      busy.busy(); out.set_seq(in.seq()); out.set_payload(std::string(8, 'r'));
      rw.Write(out, &wr); spin_until(*cq, &wr);
    }
    int fin; rw.Finish(grpc::Status::OK, &fin);
    void* tag; bool ok; cq->Next(&tag, &ok);
  }
  return 0;
}
static void report(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("%s: median %.3f ms, p90 %.3f ms, min %.3f ms (n=%zu)\n", what, v[v.size()/2], v[v.size()*9/10], v[0], v.size());
}
int main(int argc, char** argv) {
  std::string mode = argv[1], addr = argv[2];
  if (mode == "spinserver") return spin_server(addr, argc > 3 ? std::stoi(argv[3]) : 0);
  if (mode == "server") {
    Svc svc; svc.work_us = argc > 3 ? std::stoi(argv[3]) : 0; grpc::ServerBuilder b; b.AddListeningPort(addr, grpc::InsecureServerCredentials()); b.RegisterService(&svc);
    auto srv = b.BuildAndStart(); srv->Wait(); return 0;
  }
  const int bytes = std::stoi(argv[3]), n = 400;
  auto ch = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  auto stub = hopbench::Hop::NewStub(ch);
  hopbench::Msg m; m.set_payload(std::string(bytes, 'x'));
  std::vector<double> u, s;
  const bool unary = !(argc > 4 && std::string(argv[4]) == "streams");  // a spinserver serves only the stream
  for (int i = 0; unary && i < n + 20; ++i) {
    grpc::ClientContext ctx; ctx.set_deadline(system_clock::now() + seconds(30)); ctx.AddMetadata("x-key", "0123456789abcdef");
    hopbench::Msg r; m.set_seq(i);
    auto t = steady_clock::now();
    auto st = stub->Unary(&ctx, m, &r);
    if (!st.ok()) { std::fprintf(stderr, "unary failed: %s\n", st.error_message().c_str()); return 1; }
    if (i >= 20) u.push_back(duration<double, std::milli>(steady_clock::now() - t).count());
  }
  grpc::ClientContext ctx; ctx.AddMetadata("x-key", "0123456789abcdef");
  auto rw = stub->Stream(&ctx);
  for (int i = 0; i < n + 20; ++i) {
    hopbench::Msg r; m.set_seq(i);
    auto t = steady_clock::now();
    if (!rw->Write(m) || !rw->Read(&r)) { std::fprintf(stderr, "stream failed\n"); return 1; }
    if (i >= 20) s.push_back(duration<double, std::milli>(steady_clock::now() - t).count());
  }
  rw->WritesDone(); rw->Finish();
  std::vector<double> sp;  // the stream again, this client polling its queue without sleeping
  {
    grpc::CompletionQueue cq; grpc::ClientContext c2; c2.AddMetadata("x-key", "0123456789abcdef");
    int start, wr, rd;
    auto arw = stub->AsyncStream(&c2, &cq, &start); spin_until(cq, &start);
    for (int i = 0; i < n + 20; ++i) {
      hopbench::Msg r; m.set_seq(i);
      auto t = steady_clock::now();
      arw->Write(m, &wr); spin_until(cq, &wr); arw->Read(&r, &rd); spin_until(cq, &rd);
      if (i >= 20) sp.push_back(duration<double, std::milli>(steady_clock::now() - t).count());
    }
    int fin; grpc::Status st; arw->WritesDone(&wr); spin_until(cq, &wr); arw->Finish(&st, &fin); spin_until(cq, &fin);
  }
  char w[64]; std::snprintf(w, sizeof w, "unary  %6d B", bytes); if (unary) report(w, u);
  std::snprintf(w, sizeof w, "stream %6d B", bytes); report(w, s);
  std::snprintf(w, sizeof w, "spin stream %6d B", bytes); report(w, sp);
  return 0;
}
