// The C++ side of backend/gloo.h: Gloo's rendezvous over distmgr's store
// client, and its collectives behind C functions that never let an
// exception out.
#include <netdb.h>
#include <unistd.h>

#include <chrono>
#include <complex>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/reduce.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

extern "C" {
#include "backend/gloo.h"
#include "mem/f16_loops.h"
}

namespace {

// A distmgr error thrown through Gloo's code (its store calls): guarded()
// returns its status, not one guessed from the message.
struct status_error : std::runtime_error {
  dist_status code;
  status_error(dist_status c, const std::string &m) : std::runtime_error(m), code(c) {}
};

// Gloo's store interface over distmgr's client, under one key prefix.
class Store : public gloo::rendezvous::Store {
 public:
  Store(dist__store_client *c, std::string prefix, double timeout) : c_(c), prefix_(std::move(prefix)), timeout_(timeout) {}
  void set(const std::string &key, const std::vector<char> &data) override {
    check(dist__store_set(c_, (prefix_ + key).c_str(), data.data(), data.size()), {});
  }
  // Gloo's rendezvous gets keys it has not waited for: get blocks until they exist.
  std::vector<char> get(const std::string &key) override {
    uint8_t *v = nullptr;
    size_t n = 0;
    check(dist__store_get(c_, (prefix_ + key).c_str(), timeout_, &v, &n), {key});
    std::vector<char> out(v, v + n);
    free(v);
    return out;
  }
  void wait(const std::vector<std::string> &keys) override { wait(keys, std::chrono::milliseconds((long)(timeout_ * 1e3))); }
  void wait(const std::vector<std::string> &keys, const std::chrono::milliseconds &timeout) override {
    std::vector<std::string> full;
    std::vector<const char *> ptr;
    for (const auto &k : keys) full.push_back(prefix_ + k);
    for (const auto &k : full) ptr.push_back(k.c_str());
    check(dist__store_wait(c_, ptr.data(), ptr.size(), (double)timeout.count() / 1e3), keys);
  }

 private:
  // Gloo's keys are a rank ("3": its addresses) or "rank_3" (its host): a
  // timeout names the ranks that did not come.
  void check(dist_status s, const std::vector<std::string> &keys) const {
    if (!s) return;
    std::string msg = dist_last_error();
    if (s == DIST_ERR_TIMEOUT && !dist__store_saw_give_up(c_)) {  // not a rank's own timeout, passed on
      std::string ranks;
      for (const auto &k : keys) {
        std::string r = k.rfind("rank_", 0) == 0 ? k.substr(5) : k;
        if (!r.empty() && r.find_first_not_of("0123456789") == std::string::npos) ranks += (ranks.empty() ? "" : ",") + r;
      }
      if (!ranks.empty()) msg = "rank " + ranks + " did not join the context in time (" + msg + ")";
    }
    throw status_error(s, msg);
  }
  dist__store_client *c_;
  std::string prefix_;
  double timeout_;
};

// Run f; an exception becomes a distmgr error naming the call.
template <typename F>
dist_status guarded(const char *what, F f) {
  try {
    f();
    return DIST_SUCCESS;
  } catch (const status_error &e) {  // the store's own: a timeout, a rank that gave up
    return dist__error(e.code, "Gloo %s: %s", what, e.what());
  } catch (const std::exception &e) {
    const char *m = e.what();
    // A peer's connection that ended: that process left or died.
    bool gone = strstr(m, "Connection closed") || strstr(m, "Connection reset") || strstr(m, "Broken pipe");
    dist_status s = gone ? DIST_ERR_ABORTED : strstr(m, "imed out") || strstr(m, "imeout") ? DIST_ERR_TIMEOUT : DIST_ERR_IO;
    return dist__error(s, "Gloo %s: %s%s", what, m, gone ? " (a peer process left or died)" : "");
  } catch (...) {
    return dist__error(DIST_ERR_INTERNAL, "Gloo %s: an unknown exception", what);
  }
}

bool resolves(const char *host) {
  struct addrinfo *found = nullptr;
  bool ok = getaddrinfo(host, nullptr, nullptr, &found) == 0;
  if (found) freeaddrinfo(found);
  return ok;
}

}  // namespace

struct dist__gloo {
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  std::chrono::milliseconds timeout;
  uint32_t tag = 0;  // a fresh tag per call keeps calls apart
  std::vector<char> scratch;  // all-reduce's receive buffer, kept between calls
};

dist_status dist__gloo_connect(dist__store_client *store, const char *prefix, int rank, int size, double timeout,
                               dist__gloo **out) {
  *out = nullptr;
  if (!store || !prefix || size < 1 || rank < 0 || rank >= size || !(timeout > 0))
    return dist__error(DIST_ERR_INVALID_ARGUMENT, "Gloo context: rank %d of %d, timeout %g s", rank, size, timeout);
  dist__gloo *g = new (std::nothrow) dist__gloo;
  if (!g) return dist__error(DIST_ERR_NO_MEMORY, "Gloo context");
  g->timeout = std::chrono::milliseconds((long long)(timeout * 1e3));
  dist_status s = guarded("rendezvous", [&] {
    gloo::transport::tcp::attr a;
    const char *iface = getenv("GLOO_SOCKET_IFNAME");
    char host[256] = "", ip[64] = "";
    gethostname(host, sizeof host - 1);
    if (iface && *iface) a.iface = iface;
    else if (resolves(host)) a.hostname = host;
    // A host name that resolves nowhere (a bare node, a container): this
    // end of the store connection, an address the store's host reaches.
    else if (dist__store_local_addr(store, ip, sizeof ip) == 0) a.hostname = ip;
    else a.hostname = host;
    auto dev = gloo::transport::tcp::CreateDevice(a);
    Store st(store, prefix, timeout);
    g->ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    g->ctx->setTimeout(g->timeout);
    g->ctx->connectFullMesh(st, dev);
  });
  if (s) {
    delete g;
    return s;
  }
  *out = g;
  return DIST_SUCCESS;
}

void dist__gloo_free(dist__gloo *g) { delete g; }
int dist__gloo_rank(const dist__gloo *g) { return g->ctx->rank; }
int dist__gloo_size(const dist__gloo *g) { return g->ctx->size; }

namespace {
using ReduceFn = void (*)(void *, const void *, const void *, size_t);

template <typename T>
ReduceFn reducer(dist_reduce_op op) {
  switch (op) {
    case DIST_MAX: return static_cast<ReduceFn>(&gloo::max<T>);
    case DIST_MIN: return static_cast<ReduceFn>(&gloo::min<T>);
    case DIST_PROD: return static_cast<ReduceFn>(&gloo::product<T>);
    default: return static_cast<ReduceFn>(&gloo::sum<T>);  // sum, and avg's sum
  }
}

// Complex product, elementwise (Gloo has sums of complex values as pairs of
// reals, but no product): c may alias a or b, each element is read first.
template <typename R>
void complex_product(void *c, const void *a, const void *b, size_t n) {
  auto *z = static_cast<std::complex<R> *>(c);
  auto *x = static_cast<const std::complex<R> *>(a), *y = static_cast<const std::complex<R> *>(b);
  for (size_t i = 0; i < n; i++) z[i] = x[i] * y[i];
}

// One point-to-point step of a schedule on `slot`: post the receive, then
// the send, then wait for both (a negative rank, or no bytes: nothing that
// way; both ends of a pair compute the same sizes).
void step(dist__gloo *g, uint64_t slot, const void *send, size_t sbytes, int to, void *recv, size_t rbytes, int from) {
  std::unique_ptr<gloo::transport::UnboundBuffer> s, r;
  if (from >= 0 && rbytes) {
    r = g->ctx->createUnboundBuffer(recv, rbytes);
    r->recv(from, slot);
  }
  if (to >= 0 && sbytes) {
    s = g->ctx->createUnboundBuffer(const_cast<void *>(send), sbytes);
    s->send(to, slot);
  }
  if (s) s->waitSend(g->timeout);
  if (r) r->waitRecv(g->timeout);
}

// Below `doubling_below` bytes an all-reduce is latency-bound: recursive
// doubling over point-to-point steps (whole buffer per step) takes log2 P
// steps where Gloo's ring takes 2(P-1); a group size that is not a power of 2
// first folds pairs (MPICH's schedule, as the control round in agree.c).
// Every rank ends with the same bits: each combine is mine (op) theirs of
// commutative operands, and the folded ranks get a copy. From there on,
// Gloo's ring (pipelined, the ring's traffic), as torch uses. Measured at 2
// and 4 ranks (bench/RESULTS.md, the Gloo path): doubling ahead up to 256
// KiB, the ring from 1 MiB; Rabenseifner's halving/doubling was no better
// than the ring here at any size.
const size_t doubling_below = 512 << 10;

template <typename T>
void allreduce_doubling(dist__gloo *g, T *x, size_t n, ReduceFn fn) {
  const int me = g->ctx->rank, P = g->ctx->size;
  const size_t bytes = n * sizeof(T);
  if (g->scratch.size() < bytes) g->scratch.resize(bytes);
  T *tmp = reinterpret_cast<T *>(g->scratch.data());
  const uint64_t slot = gloo::Slot::build(0x45, g->tag++);
  int pof2 = 1;
  while (pof2 * 2 <= P) pof2 *= 2;
  const int rem = P - pof2;
  int vrank = me - rem;  // ranks below 2*rem pair up first: the odd one goes on for both
  if (me < 2 * rem && me % 2 == 0) {
    step(g, slot, x, bytes, me + 1, nullptr, 0, -1);
    vrank = -1;
  } else if (me < 2 * rem) {
    step(g, slot, nullptr, 0, -1, tmp, bytes, me - 1);
    fn(x, x, tmp, n);
    vrank = me / 2;
  }
  for (int mask = 1; vrank >= 0 && mask < pof2; mask <<= 1) {
    int v = vrank ^ mask, peer = v < rem ? v * 2 + 1 : v + rem;
    step(g, slot, x, bytes, peer, tmp, bytes, peer);
    fn(x, x, tmp, n);
  }
  if (me < 2 * rem) {  // the result back to the even partner
    if (me % 2) step(g, slot, x, bytes, me - 1, nullptr, 0, -1);
    else step(g, slot, nullptr, 0, -1, x, bytes, me + 1);
  }
}

template <typename T>
void allreduce_with(dist__gloo *g, void *buf, size_t n, ReduceFn fn) {
  if (g->ctx->size == 1 || n == 0) return;
  if (n * sizeof(T) < doubling_below) return allreduce_doubling<T>(g, static_cast<T *>(buf), n, fn);
  gloo::AllreduceOptions o(g->ctx);
  o.setOutput(static_cast<T *>(buf), n);
  o.setReduceFunction(fn);
  o.setTag(g->tag++);
  o.setTimeout(g->timeout);
  gloo::allreduce(o);
}

template <typename T>
void allreduce_as(dist__gloo *g, void *buf, size_t n, dist_reduce_op op) {
  allreduce_with<T>(g, buf, n, reducer<T>(op));
}

template <typename T>
void reduce_with(dist__gloo *g, const void *in, void *out, size_t n, int root, ReduceFn fn) {
  gloo::ReduceOptions o(g->ctx);
  o.setInput(static_cast<T *>(const_cast<void *>(in)), n);
  o.setOutput(static_cast<T *>(out), n);
  o.setRoot(root);
  o.setReduceFunction(fn);
  o.setTag(g->tag++);
  o.setTimeout(g->timeout);
  gloo::reduce(o);
}

template <typename T>
void reduce_as(dist__gloo *g, const void *in, void *out, size_t n, int root, dist_reduce_op op) {
  reduce_with<T>(g, in, out, n, root, reducer<T>(op));
}

// Element type of a reduction; complex sums reduce as pairs of reals (*mult
// = 2), complex products as complex values (5: c64, 6: c128).
int real_type(dist_dtype t, dist_reduce_op op, int *mult) {
  *mult = (t == DIST_C64 || t == DIST_C128) ? 2 : 1;
  if (*mult == 2 && op == DIST_PROD) return *mult = 1, t == DIST_C64 ? 5 : 6;
  if (*mult == 2 && op != DIST_SUM && op != DIST_AVG) return -1;
  switch (t) {
    case DIST_F32: case DIST_C64: return 0;
    case DIST_F64: case DIST_C128: return 1;
    case DIST_I32: return 2;
    case DIST_I64: return 3;
    case DIST_U8: return 4;
    default: return -1;
  }
}
}  // namespace

dist_status dist__gloo_all_reduce(dist__gloo *g, void *buf, size_t count, dist_dtype t, dist_reduce_op op) {
  int mult, k = real_type(t, op, &mult);
  if (k < 0)
    return dist__error(DIST_ERR_UNSUPPORTED, "Gloo all-reduce: %s of %s", dist_reduce_op_name(op), dist_dtype_name(t));
  size_t n = count * (size_t)mult;
  return guarded("all-reduce", [&] {
    switch (k) {
      case 0: allreduce_as<float>(g, buf, n, op); break;
      case 1: allreduce_as<double>(g, buf, n, op); break;
      case 2: allreduce_as<int32_t>(g, buf, n, op); break;
      case 3: allreduce_as<int64_t>(g, buf, n, op); break;
      case 4: allreduce_as<uint8_t>(g, buf, n, op); break;
      case 5: allreduce_with<std::complex<float>>(g, buf, n, &complex_product<float>); break;
      default: allreduce_with<std::complex<double>>(g, buf, n, &complex_product<double>); break;
    }
  });
}

namespace {
// Gloo's combine is c = a + b, where c may be a or b; the loops add in place.
template <void (*Sum)(const uint16_t *, uint16_t *, size_t)>
void sum16(void *c, const void *a, const void *b, size_t n) {
  auto *out = static_cast<uint16_t *>(c);
  auto *x = static_cast<const uint16_t *>(a), *y = static_cast<const uint16_t *>(b);
  if (out == y) return Sum(x, out, n);
  if (out != x) memcpy(out, x, n * sizeof *out);
  Sum(y, out, n);
}
}  // namespace

dist_status dist__gloo_sum16(dist__gloo *g, void *buf, size_t count, dist_dtype t) {
  if (t != DIST_BF16 && t != DIST_F16)
    return dist__error(DIST_ERR_INTERNAL, "Gloo 16-bit sum of %s", dist_dtype_name(t));
  return guarded("16-bit sum", [&] {
    allreduce_with<uint16_t>(g, buf, count, t == DIST_BF16 ? &sum16<dist__bf16_sum> : &sum16<dist__f16_sum>);
  });
}

dist_status dist__gloo_broadcast(dist__gloo *g, void *buf, size_t bytes, int root) {
  return guarded("broadcast", [&] {
    gloo::BroadcastOptions o(g->ctx);
    o.setOutput(static_cast<uint8_t *>(buf), bytes);
    o.setRoot(root);
    o.setTag(g->tag++);
    o.setTimeout(g->timeout);
    gloo::broadcast(o);
  });
}

dist_status dist__gloo_all_gather_v(dist__gloo *g, const void *send, void *recv, const size_t *bytes) {
  return guarded("all-gather-v", [&] {
    std::vector<size_t> n(bytes, bytes + g->ctx->size);
    gloo::AllgathervOptions o(g->ctx);
    o.setInput(static_cast<uint8_t *>(const_cast<void *>(send)), n[g->ctx->rank]);
    o.setOutput(static_cast<uint8_t *>(recv), n);
    o.setTag(g->tag++);
    o.setTimeout(g->timeout);
    gloo::allgatherv(o);
  });
}

dist_status dist__gloo_all_to_all_v(dist__gloo *g, const void *send, const size_t *send_bytes, void *recv,
                                    const size_t *recv_bytes) {
  return guarded("all-to-all-v", [&] {
    std::vector<int64_t> s(send_bytes, send_bytes + g->ctx->size), r(recv_bytes, recv_bytes + g->ctx->size);
    gloo::AlltoallvOptions o(g->ctx);
    o.setInput(static_cast<uint8_t *>(const_cast<void *>(send)), s);
    o.setOutput(static_cast<uint8_t *>(recv), r);
    o.setTag(g->tag++);
    o.setTimeout(g->timeout);
    gloo::alltoallv(o);
  });
}

dist_status dist__gloo_reduce(dist__gloo *g, const void *send, void *recv, size_t count, dist_dtype t,
                              dist_reduce_op op, int root) {
  int mult, k = real_type(t, op, &mult);
  if (k < 0)
    return dist__error(DIST_ERR_UNSUPPORTED, "Gloo reduce: %s of %s", dist_reduce_op_name(op), dist_dtype_name(t));
  size_t n = count * (size_t)mult;
  std::vector<char> scratch;
  if (g->ctx->rank != root) scratch.resize(count * dist_dtype_size(t) + 1);
  void *out = g->ctx->rank == root ? recv : scratch.data();
  return guarded("reduce", [&] {
    switch (k) {
      case 0: reduce_as<float>(g, send, out, n, root, op); break;
      case 1: reduce_as<double>(g, send, out, n, root, op); break;
      case 2: reduce_as<int32_t>(g, send, out, n, root, op); break;
      case 3: reduce_as<int64_t>(g, send, out, n, root, op); break;
      case 4: reduce_as<uint8_t>(g, send, out, n, root, op); break;
      case 5: reduce_with<std::complex<float>>(g, send, out, n, root, &complex_product<float>); break;
      default: reduce_with<std::complex<double>>(g, send, out, n, root, &complex_product<double>); break;
    }
  });
}

dist_status dist__gloo_reduce_scatter_v(dist__gloo *g, const void *send, void *recv, const size_t *counts,
                                        dist_dtype t, dist_reduce_op op) {
  size_t es = dist_dtype_size(t), off = 0;
  for (int r = 0; r < g->ctx->size; r++) {
    DIST_CHECK(dist__gloo_reduce(g, static_cast<const char *>(send) + off, recv, counts[r], t, op, r));
    off += counts[r] * es;
  }
  return DIST_SUCCESS;
}

dist_status dist__gloo_exchange(dist__gloo *g, const void *send, const size_t *sb, const size_t *sd, void *recv,
                                const size_t *rb, const size_t *rd) {
  int me = g->ctx->rank, P = g->ctx->size;
  char *in = static_cast<char *>(const_cast<void *>(send)), *out = static_cast<char *>(recv);
  if (sb && rb && sb[me]) memmove(out + rd[me], in + sd[me], sb[me]);
  return guarded("exchange", [&] {
    // One slot per call (every member makes the same calls in the same order).
    uint64_t slot = gloo::Slot::build(0x44, g->tag++);
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> sends, recvs;
    for (int r = 0; r < P; r++) {
      if (r == me) continue;
      if (rb && rb[r]) {
        recvs.push_back(g->ctx->createUnboundBuffer(out + rd[r], rb[r]));
        recvs.back()->recv(r, slot);
      }
      if (sb && sb[r]) {
        sends.push_back(g->ctx->createUnboundBuffer(in + sd[r], sb[r]));
        sends.back()->send(r, slot);
      }
    }
    for (auto &b : sends) b->waitSend(g->timeout);
    for (auto &b : recvs) b->waitRecv(g->timeout);
  });
}

dist_status dist__gloo_sendrecv(dist__gloo *g, const void *send, size_t sbytes, int to, void *recv, size_t rbytes,
                                int from) {
  // The control schedule's own slot. The ranks go into the message only on
  // failure: this runs in every verified call.
  dist_status st = guarded("control step", [&] { step(g, gloo::Slot::build(0x43, 0), send, sbytes, to, recv, rbytes, from); });
  if (!st) return st;
  std::string msg = dist_last_error(); // dist__error writes where dist_last_error reads
  return dist__error(st, "%s (to rank %d, from rank %d)", msg.c_str(), to, from);
}

dist_status dist__gloo_exchange_all(dist__gloo *g, const void *send, size_t bytes, void *recv) {
  return guarded("control exchange", [&] {
    const int me = g->ctx->rank, P = g->ctx->size;
    const uint64_t slot = gloo::Slot::build(0x43, 0); // the control steps' slot: one pattern per group
    auto r = g->ctx->createUnboundBuffer(recv, bytes * (size_t)(P - 1));
    auto s = g->ctx->createUnboundBuffer(const_cast<void *>(send), bytes);
    for (int k = 1; k < P; k++) r->recv((me - k + P) % P, slot, bytes * (size_t)(k - 1), bytes);
    for (int k = 1; k < P; k++) s->send((me + k) % P, slot);
    for (int k = 1; k < P; k++) s->waitSend(g->timeout);
    for (int k = 1; k < P; k++) r->waitRecv(g->timeout);
  });
}

dist_status dist__gloo_barrier(dist__gloo *g) {
  return guarded("barrier", [&] {
    gloo::BarrierOptions o(g->ctx);
    o.setTag(g->tag++);
    o.setTimeout(g->timeout);
    gloo::barrier(o);
  });
}

