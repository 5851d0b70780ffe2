// dist_gloo.node: collectives across processes and nodes through Gloo (Debian libgloo-dev), a separate optional addon
// (src/distributed/gloo_communicator.ts loads it in try/catch), so a missing libgloo never breaks the compute addon.
// One group = one gloo rendezvous Context over the TCP transport, meeting through tsglang's TCP store
// (kv_store_client.h). Every call runs on the calling thread (a rank thread, never the HTTP thread) and blocks it.
//
// Pitfalls designed around (shared/design/distributed.md §2.6–2.7): the thread that creates the device is switched to
// SCHED_BATCH first, so gloo's event-loop thread (created there, inheriting it) stops stalling small collectives by a
// scheduler tick (4 ms); Gloo throws C++ exceptions (built with -fexceptions -frtti) and a context is unusable after
// one, so the group is marked broken and every later call fails with the first error.
//
// Sums: all-reduce and reduce-scatter move data with all-gather / all-to-all and add the ranks' contributions here in
// rank order (the same left-to-right f32 adds as the shared-memory communicator), so every rank gets the same bits.
//
//   glooCreate(storeHost, storePort, prefix, rank, size, bindHost, timeoutMs) → handle
//   glooAllReduceSum(h, f32, timeoutMs)  glooAllGather(h, src, dst, timeoutMs)  glooReduceScatterSum(h, src, dst, t)
//   glooBroadcast(h, buf, root, timeoutMs)  glooAllToAll(h, src, dst, timeoutMs)  glooBarrier(h, timeoutMs)
//   glooSendAsync(h, header, payload, dstRank, slot, timeoutMs)  glooWaitSends(h, timeoutMs)
//   glooRecvBytes(h, buf, srcRank, slot, timeoutMs)   (point-to-point: pipeline-parallel links)
//   glooClose(h)  glooStoreAdd(host, port, key, delta, timeoutMs) → number   (all throw Error with the reason)
//   glooHardExit(code): _exit(code)
//
// Point-to-point: a send copies the bytes into a buffer the group owns and posts them (gloo's unbound-buffer send,
// progressed by the device thread once the peer posts the matching receive), then returns: the caller computes on
// while the transfer happens. The next send first waits for the previous one (one message in flight per sender).
#include <node_api.h>
#include <immintrin.h>
#include <sched.h>
#include <unistd.h>

#include <gloo/allgather.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kv_store_client.h"

namespace {

struct Failure {
  std::string msg;
};

/** A posted point-to-point send: the bytes (owned) and gloo's buffer over them. */
struct PendingSend {
  std::vector<uint8_t> data;
  std::unique_ptr<gloo::transport::UnboundBuffer> buf;
};

struct Group {
  std::unique_ptr<tsg::KvStoreClient> store;
  std::unique_ptr<gloo::rendezvous::PrefixStore> prefixed;
  std::shared_ptr<gloo::transport::Device> dev;
  std::shared_ptr<gloo::rendezvous::Context> ctx;
  int rank = 0, size = 1;
  uint32_t tag = 0;
  std::vector<float> a, b;
  std::deque<PendingSend> sends;  // point-to-point sends posted and not yet waited for
  std::string broken;  // non-empty after a failure: the first error
  bool closed = false;
};

/** Waits beyond any server's life for "no timeout" (gloo adds the timeout to now(), so no INT64_MAX). */
std::chrono::milliseconds toMs(int64_t t) { return std::chrono::milliseconds(t < 0 ? 30LL * 24 * 3600 * 1000 : t); }

/** out = Σ_j blocks[j·stride ..] over j in order (8 lanes, same adds as the scalar loop). */
void sumBlocks(float* out, const float* blocks, size_t stride, int nb, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 acc = _mm256_loadu_ps(blocks + i);
    for (int j = 1; j < nb; ++j) acc = _mm256_add_ps(acc, _mm256_loadu_ps(blocks + static_cast<size_t>(j) * stride + i));
    _mm256_storeu_ps(out + i, acc);
  }
  for (; i < n; ++i) {
    float acc = blocks[i];
    for (int j = 1; j < nb; ++j) acc += blocks[static_cast<size_t>(j) * stride + i];
    out[i] = acc;
  }
}

// ---- collectives (throw std::exception from gloo) ----

void allGatherBytes(Group& g, const uint8_t* src, size_t bytes, uint8_t* dst, int64_t t) {
  if (bytes == 0) {
    gloo::BarrierOptions o(g.ctx);
    o.setTag(g.tag++);
    o.setTimeout(toMs(t));
    gloo::barrier(o);
    return;
  }
  gloo::AllgatherOptions o(g.ctx);
  o.setInput(const_cast<uint8_t*>(src), bytes);
  o.setOutput(dst, bytes * static_cast<size_t>(g.size));
  o.setTag(g.tag++);
  o.setTimeout(toMs(t));
  gloo::allgather(o);
}

void allToAllBytes(Group& g, const uint8_t* src, size_t total, uint8_t* dst, int64_t t) {
  if (total == 0) return allGatherBytes(g, src, 0, dst, t);
  gloo::AlltoallOptions o(g.ctx);
  o.setInput(const_cast<uint8_t*>(src), total);
  o.setOutput(dst, total);
  o.setTag(g.tag++);
  o.setTimeout(toMs(t));
  gloo::alltoall(o);
}

void allReduceSum(Group& g, float* buf, size_t n, int64_t t) {
  const size_t P = static_cast<size_t>(g.size);
  if (P == 1) return;
  if (P == 2 || n * 4 * P <= (256u << 10)) {
    // Gather every rank's vector, add in rank order (for 2 ranks this moves as many bytes as a ring all-reduce).
    g.a.resize(n * P);
    allGatherBytes(g, reinterpret_cast<uint8_t*>(buf), n * 4, reinterpret_cast<uint8_t*>(g.a.data()), t);
    sumBlocks(buf, g.a.data(), n, g.size, n);
    return;
  }
  // Reduce-scatter by all-to-all (rank r receives block r of every rank), add in rank order, all-gather the sums.
  const size_t m = (n + P - 1) / P;
  g.a.assign(m * P, 0.f);
  std::memcpy(g.a.data(), buf, n * 4);
  g.b.resize(m * P);
  allToAllBytes(g, reinterpret_cast<uint8_t*>(g.a.data()), m * P * 4, reinterpret_cast<uint8_t*>(g.b.data()), t);
  std::vector<float> mine(m);
  sumBlocks(mine.data(), g.b.data(), m, g.size, m);
  allGatherBytes(g, reinterpret_cast<uint8_t*>(mine.data()), m * 4, reinterpret_cast<uint8_t*>(g.a.data()), t);
  std::memcpy(buf, g.a.data(), n * 4);
}

void reduceScatterSum(Group& g, const float* src, size_t m, float* dst, int64_t t) {
  const size_t P = static_cast<size_t>(g.size);
  g.b.resize(m * P);
  allToAllBytes(g, reinterpret_cast<const uint8_t*>(src), m * P * 4, reinterpret_cast<uint8_t*>(g.b.data()), t);
  sumBlocks(dst, g.b.data(), m, g.size, m);
}

void broadcastBytes(Group& g, uint8_t* buf, size_t bytes, int root, int64_t t) {
  if (bytes == 0) return allGatherBytes(g, buf, 0, buf, t);
  gloo::BroadcastOptions o(g.ctx);
  o.setOutput(buf, bytes);
  o.setRoot(root);
  o.setTag(g.tag++);
  o.setTimeout(toMs(t));
  gloo::broadcast(o);
}

// ---- N-API plumbing ----

napi_value undef(napi_env env) {
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

struct Args {
  napi_env env;
  std::vector<napi_value> v;
  Args(napi_env e, napi_callback_info info, size_t n) : env(e), v(n) {
    size_t argc = n;
    if (napi_get_cb_info(e, info, &argc, v.data(), nullptr, nullptr) != napi_ok || argc < n)
      throw Failure{"expected " + std::to_string(n) + " arguments"};
  }
  int64_t i64(size_t i) const {
    int64_t d;
    if (napi_get_value_int64(env, v[i], &d) != napi_ok) throw Failure{"argument " + std::to_string(i) + " must be an integer"};
    return d;
  }
  std::string str(size_t i) const {
    size_t len = 0;
    if (napi_get_value_string_utf8(env, v[i], nullptr, 0, &len) != napi_ok) throw Failure{"argument " + std::to_string(i) + " must be a string"};
    std::string s(len, '\0');
    napi_get_value_string_utf8(env, v[i], &s[0], len + 1, &len);
    return s;
  }
  uint8_t* bytes(size_t i, size_t* n, napi_typedarray_type* type = nullptr) const {
    napi_typedarray_type t;
    size_t length, off;
    void* data;
    napi_value ab;
    if (napi_get_typedarray_info(env, v[i], &t, &length, &data, &ab, &off) != napi_ok) throw Failure{"argument " + std::to_string(i) + " must be a typed array"};
    size_t elem = (t == napi_float32_array || t == napi_int32_array || t == napi_uint32_array) ? 4 : (t == napi_float64_array ? 8 : (t == napi_int16_array || t == napi_uint16_array) ? 2 : 1);
    *n = length * elem;
    if (type) *type = t;
    return static_cast<uint8_t*>(data);
  }
  Group* group(size_t i) const {
    void* p = nullptr;
    if (napi_get_value_external(env, v[i], &p) != napi_ok || !p) throw Failure{"expected a gloo group handle"};
    auto* g = static_cast<Group*>(p);
    if (g->closed) throw Failure{"the group is closed"};
    if (!g->broken.empty()) throw Failure{"the group is broken by an earlier error: " + g->broken};
    return g;
  }
};

using Fn = napi_value (*)(napi_env, napi_callback_info);

napi_value guarded(napi_env env, napi_callback_info info, napi_value (*fn)(napi_env, napi_callback_info, Group**)) {
  Group* g = nullptr;
  try {
    return fn(env, info, &g);
  } catch (const Failure& f) {
    napi_throw_error(env, "TSGLANG_GLOO", f.msg.c_str());
  } catch (const std::exception& e) {
    if (g && g->broken.empty()) g->broken = e.what();
    napi_throw_error(env, "TSGLANG_GLOO", e.what());
  } catch (...) {
    if (g && g->broken.empty()) g->broken = "unknown error";
    napi_throw_error(env, "TSGLANG_GLOO", "unknown error");
  }
  return nullptr;
}

#define GLOO_FN(name)                                                                           \
  napi_value name##_impl(napi_env env, napi_callback_info info, Group** gp);                    \
  napi_value name(napi_env env, napi_callback_info info) { return guarded(env, info, name##_impl); } \
  napi_value name##_impl(napi_env env, napi_callback_info info, Group** gp)

void destroy(Group* g) {
  g->sends.clear();
  g->ctx.reset();
  g->dev.reset();
  g->prefixed.reset();
  g->store.reset();
}

GLOO_FN(glooCreate) {
  (void)gp;
  Args a(env, info, 7);
  const std::string host = a.str(0), prefix = a.str(2), bind = a.str(5);
  const int64_t port = a.i64(1), rank = a.i64(3), size = a.i64(4), timeout = a.i64(6);
  if (size < 1 || rank < 0 || rank >= size) throw Failure{"bad rank/size"};
  // SCHED_BATCH before the device exists: gloo's loop thread is created by CreateDevice and inherits the policy.
  sched_param sp{};
  sp.sched_priority = 0;
  sched_setscheduler(0, SCHED_BATCH, &sp);
  auto g = std::make_unique<Group>();
  g->rank = static_cast<int>(rank);
  g->size = static_cast<int>(size);
  g->store = std::make_unique<tsg::KvStoreClient>(host, static_cast<int>(port), toMs(timeout));
  g->prefixed = std::make_unique<gloo::rendezvous::PrefixStore>(prefix, *g->store);
  gloo::transport::tcp::attr attr;
  attr.hostname = bind;
  g->dev = gloo::transport::tcp::CreateDevice(attr);
  g->ctx = std::make_shared<gloo::rendezvous::Context>(g->rank, g->size);
  g->ctx->setTimeout(toMs(timeout));
  g->ctx->connectFullMesh(*g->prefixed, g->dev);
  napi_value out;
  napi_create_external(env, g.release(), [](napi_env, void* d, void*) {
        auto* gg = static_cast<Group*>(d);
        destroy(gg);
        delete gg;
      }, nullptr, &out);
  return out;
}

GLOO_FN(glooAllReduceSum) {
  Args a(env, info, 3);
  Group* g = *gp = a.group(0);
  size_t n;
  napi_typedarray_type t;
  uint8_t* p = a.bytes(1, &n, &t);
  if (t != napi_float32_array) throw Failure{"allReduceSum needs a Float32Array"};
  allReduceSum(*g, reinterpret_cast<float*>(p), n / 4, a.i64(2));
  return undef(env);
}

GLOO_FN(glooAllGather) {
  Args a(env, info, 4);
  Group* g = *gp = a.group(0);
  size_t sn, dn;
  uint8_t* s = a.bytes(1, &sn);
  uint8_t* d = a.bytes(2, &dn);
  if (dn != sn * static_cast<size_t>(g->size)) throw Failure{"allGather: dst must hold size × src"};
  allGatherBytes(*g, s, sn, d, a.i64(3));
  return undef(env);
}

GLOO_FN(glooReduceScatterSum) {
  Args a(env, info, 4);
  Group* g = *gp = a.group(0);
  size_t sn, dn;
  napi_typedarray_type st, dt;
  uint8_t* s = a.bytes(1, &sn, &st);
  uint8_t* d = a.bytes(2, &dn, &dt);
  if (st != napi_float32_array || dt != napi_float32_array || sn != dn * static_cast<size_t>(g->size))
    throw Failure{"reduceScatterSum: Float32Arrays, src = size × dst"};
  reduceScatterSum(*g, reinterpret_cast<float*>(s), dn / 4, reinterpret_cast<float*>(d), a.i64(3));
  return undef(env);
}

GLOO_FN(glooBroadcast) {
  Args a(env, info, 4);
  Group* g = *gp = a.group(0);
  size_t n;
  uint8_t* p = a.bytes(1, &n);
  const int64_t root = a.i64(2);
  if (root < 0 || root >= g->size) throw Failure{"broadcast: bad root"};
  broadcastBytes(*g, p, n, static_cast<int>(root), a.i64(3));
  return undef(env);
}

GLOO_FN(glooAllToAll) {
  Args a(env, info, 4);
  Group* g = *gp = a.group(0);
  size_t sn, dn;
  uint8_t* s = a.bytes(1, &sn);
  uint8_t* d = a.bytes(2, &dn);
  if (sn != dn || sn % static_cast<size_t>(g->size) != 0) throw Failure{"allToAll: src and dst of size × block bytes"};
  allToAllBytes(*g, s, sn, d, a.i64(3));
  return undef(env);
}

GLOO_FN(glooBarrier) {
  Args a(env, info, 2);
  Group* g = *gp = a.group(0);
  gloo::BarrierOptions o(g->ctx);
  o.setTag(g->tag++);
  o.setTimeout(toMs(a.i64(1)));
  gloo::barrier(o);
  return undef(env);
}

/** Waits until every posted send of the group was taken by its peer (throws gloo's timeout / connection error). */
void waitSends(Group& g, int64_t t) {
  while (!g.sends.empty()) {
    g.sends.front().buf->waitSend(toMs(t));
    g.sends.pop_front();
  }
}

/** Posts one message's bytes at `slot` (empty bytes post nothing). */
void postSend(Group& g, const uint8_t* p, size_t n, int dst, uint64_t slot) {
  if (n == 0) return;
  PendingSend ps;
  ps.data.assign(p, p + n);
  ps.buf = g.ctx->createUnboundBuffer(ps.data.data(), n);
  ps.buf->send(dst, slot);
  g.sends.push_back(std::move(ps));
}

// glooSendAsync(h, header, payload, dstRank, slot, timeoutMs): waits for the previous message's sends, then posts the
// header at `slot` and the payload at `slot + 1` and returns at once.
GLOO_FN(glooSendAsync) {
  Args a(env, info, 6);
  Group* g = *gp = a.group(0);
  size_t hn, pn;
  uint8_t* h = a.bytes(1, &hn);
  uint8_t* p = a.bytes(2, &pn);
  const int64_t dst = a.i64(3), slot = a.i64(4), t = a.i64(5);
  if (dst < 0 || dst >= g->size || dst == g->rank) throw Failure{"send: bad destination rank"};
  waitSends(*g, t);
  postSend(*g, h, hn, static_cast<int>(dst), static_cast<uint64_t>(slot));
  postSend(*g, p, pn, static_cast<int>(dst), static_cast<uint64_t>(slot) + 1);
  return undef(env);
}

GLOO_FN(glooWaitSends) {
  Args a(env, info, 2);
  Group* g = *gp = a.group(0);
  waitSends(*g, a.i64(1));
  return undef(env);
}

// glooRecvBytes(h, buf, srcRank, slot, timeoutMs): blocks until the bytes sent at `slot` by srcRank fill `buf`.
GLOO_FN(glooRecvBytes) {
  Args a(env, info, 5);
  Group* g = *gp = a.group(0);
  size_t n;
  uint8_t* p = a.bytes(1, &n);
  const int64_t src = a.i64(2), slot = a.i64(3), t = a.i64(4);
  if (src < 0 || src >= g->size || src == g->rank) throw Failure{"recv: bad source rank"};
  if (n == 0) return undef(env);
  auto buf = g->ctx->createUnboundBuffer(p, n);
  buf->recv(static_cast<int>(src), static_cast<uint64_t>(slot));
  buf->waitRecv(toMs(t));
  return undef(env);
}

GLOO_FN(glooClose) {
  (void)gp;
  Args a(env, info, 1);
  void* p = nullptr;
  if (napi_get_value_external(env, a.v[0], &p) != napi_ok || !p) throw Failure{"expected a gloo group handle"};
  auto* g = static_cast<Group*>(p);
  if (!g->closed) {
    g->closed = true;
    destroy(g);
  }
  return undef(env);
}

GLOO_FN(glooStoreAdd) {
  (void)gp;
  Args a(env, info, 5);
  tsg::KvStoreClient c(a.str(0), static_cast<int>(a.i64(1)), toMs(a.i64(4)));
  napi_value out;
  napi_create_int64(env, c.add(a.str(2), a.i64(3)), &out);
  return out;
}

// hardExit(code): _exit(code) at once. For multi-node exit paths: a rank thread blocked in a Gloo call (waiting for a
// peer that is gone) cannot be joined, and Node joins every worker thread in process.exit. Logs are written first.
GLOO_FN(glooHardExit) {
  (void)gp;
  Args a(env, info, 1);
  _exit(static_cast<int>(a.i64(0)));
}

napi_value init(napi_env env, napi_value exports) {
  const napi_property_descriptor props[] = {
      {"glooCreate", nullptr, glooCreate, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooAllReduceSum", nullptr, glooAllReduceSum, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooAllGather", nullptr, glooAllGather, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooReduceScatterSum", nullptr, glooReduceScatterSum, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooBroadcast", nullptr, glooBroadcast, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooAllToAll", nullptr, glooAllToAll, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooBarrier", nullptr, glooBarrier, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooClose", nullptr, glooClose, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooSendAsync", nullptr, glooSendAsync, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooWaitSends", nullptr, glooWaitSends, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooRecvBytes", nullptr, glooRecvBytes, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooHardExit", nullptr, glooHardExit, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"glooStoreAdd", nullptr, glooStoreAdd, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
