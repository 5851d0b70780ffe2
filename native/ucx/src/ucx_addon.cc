// dist_ucx.node: PD KV-cache transfer through UCX (Debian libucx-dev), a separate optional addon
// (src/disagg/ucx_addon.ts loads it in try/catch), so a missing libucx never breaks anything else.
// Follows shared/design/distributed.md §4: the receiving (decode) side maps its staging region with
// UCP_MEM_MAP_ALLOCATE (on one host, puts then become a copy into a mapped shared-memory segment instead of an
// emulated path), packs its rkey and worker address for the sender (exchanged over the PD control connection), and
// keeps progressing its worker on its own thread while data streams (TCP puts are not one-sided). The sending
// (prefill) side creates an endpoint to that address, unpacks the rkey, puts the payload and flushes the endpoint
// (remote completion) on a libuv worker thread, so the engine loop never blocks. Error-handling mode NONE (the shared
// memory transports refuse PEER). UCX_TLS / UCX_NET_DEVICES are read by UCX itself from the environment; the caller may
// override UCX settings per worker (ucp_config_modify: e.g. NET_DEVICES pinned to the server's interface). Features
// RMA + AM: with AM UCX picks the TCP transport's own put_zcopy for puts (without it, puts over TCP are emulated by
// active messages answered one by one). The receiver's progress thread spins while traffic flows and sleeps on the
// worker's event fd (UCP_FEATURE_WAKEUP) when idle. A put that does not complete within its timeout (a peer that
// stopped progressing) fails instead of holding the thread. The worker handle must stay referenced from JS while it
// is in use: when it is garbage-collected its progress thread stops (a receiver that stops progressing makes the
// sender's TCP puts time out).
//
// Loading libucs into a running Node process has two side effects this addon and src/disagg/ucx_addon.ts undo:
//   - libucs installs its own handlers for UCX_ERROR_SIGNALS (SEGV, BUS, ILL, FPE) and UCX_DEBUG_SIGNO at load, over
//     Node's: a WebAssembly out-of-bounds access (a RuntimeError from Node's trap handler; the grammar backend runs
//     WASM) then kills the process with UCX's backtrace instead. Init gives every signal whose handler lives in
//     libucs back to the handler it replaced (ucs_debug_disable_signal), unless UCX_HANDLE_ERRORS is set in the
//     environment (the user asked for UCX's crash handling).
//   - libucm rewrites the first instructions of libc's mmap / munmap / madvise / brk at load (memory-event hooks,
//     UCX_MEM_EVENTS) while V8's GC threads may be running them; the JS loader sets UCX_MEM_EVENTS=no before the first
//     load (tcp and shared memory need no registration cache; on RDMA each put then registers its buffer).
//
//   ucxCreateWorker(settings?: {NAME: value}) → handle    ucxWorkerAddress(h) → Buffer
//   ucxMapRegion(h, bytes) → { buffer: ArrayBuffer (the mapped memory), address: BigInt, rkey: Buffer }
//   ucxStartProgress(h) / ucxStopProgress(h)  (receiver: progress thread)   ucxConnect(h, addressBuf) → endpoint id
//   ucxPut(h, ep, rkeyBuf, remoteAddr: BigInt, src: TypedArray|Buffer, timeoutMs) → Promise<undefined> (put + flush)
//   ucxInfo() → { version }     (all throw Error with UCX's status string)
#include <node_api.h>
#include <ucp/api/ucp.h>

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <ucs/debug/debug.h>

#include <cstdlib>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Ep {
  ucp_ep_h ep = nullptr;
  std::map<std::string, ucp_rkey_h> rkeys;  // packed rkey bytes → unpacked
};

struct Worker {
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  std::mutex mu;  // one thread at a time inside the worker (progress thread vs puts)
  std::vector<std::unique_ptr<Ep>> eps;
  std::vector<ucp_mem_h> mems;
  std::thread progress;
  std::atomic<bool> stop{false};
};

#define NAPI_OK(call)                                                   \
  do {                                                                  \
    if ((call) != napi_ok) {                                            \
      napi_throw_error(env, nullptr, "N-API call failed: " #call);      \
      return nullptr;                                                   \
    }                                                                   \
  } while (0)

napi_value throwErr(napi_env env, const std::string& msg) {
  napi_throw_error(env, nullptr, msg.c_str());
  return nullptr;
}

void finalizeWorker(napi_env, void* data, void*) {
  auto* w = static_cast<Worker*>(data);
  w->stop = true;
  if (w->progress.joinable()) w->progress.join();
  // endpoints and mappings go with the process (closing them needs the peer; the pool lives as long as the server)
}

Worker* getWorker(napi_env env, napi_value v) {
  void* p = nullptr;
  if (napi_get_value_external(env, v, &p) != napi_ok || p == nullptr) return nullptr;
  return static_cast<Worker*>(p);
}

/** Reads a JS string value into `out`. */
bool getString(napi_env env, napi_value v, std::string& out) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, nullptr, 0, &len) != napi_ok) return false;
  out.resize(len + 1);
  if (napi_get_value_string_utf8(env, v, &out[0], len + 1, &len) != napi_ok) return false;
  out.resize(len);
  return true;
}

napi_value CreateWorker(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  auto w = std::make_unique<Worker>();
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return throwErr(env, std::string("ucp_config_read: ") + ucs_status_string(st));
  napi_valuetype t = napi_undefined;
  if (argc >= 1) napi_typeof(env, argv[0], &t);
  if (t == napi_object) {
    // per-worker settings without the UCX_ prefix (e.g. NET_DEVICES); the environment's own UCX_* stay in force otherwise
    napi_value names;
    uint32_t n = 0;
    NAPI_OK(napi_get_property_names(env, argv[0], &names));
    NAPI_OK(napi_get_array_length(env, names, &n));
    for (uint32_t i = 0; i < n; i++) {
      napi_value k, v;
      std::string ks, vs;
      NAPI_OK(napi_get_element(env, names, i, &k));
      NAPI_OK(napi_get_property(env, argv[0], k, &v));
      if (!getString(env, k, ks) || !getString(env, v, vs)) {
        ucp_config_release(config);
        return throwErr(env, "ucxCreateWorker: settings must be strings");
      }
      st = ucp_config_modify(config, ks.c_str(), vs.c_str());
      if (st != UCS_OK) {
        ucp_config_release(config);
        return throwErr(env, "ucp_config_modify " + ks + "=" + vs + ": " + ucs_status_string(st));
      }
    }
  }
  ucp_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  st = ucp_init(&params, config, &w->ctx);
  ucp_config_release(config);
  if (st != UCS_OK) return throwErr(env, std::string("ucp_init: ") + ucs_status_string(st));
  ucp_worker_params_t wp;
  std::memset(&wp, 0, sizeof(wp));
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_MULTI;
  st = ucp_worker_create(w->ctx, &wp, &w->worker);
  if (st != UCS_OK) return throwErr(env, std::string("ucp_worker_create: ") + ucs_status_string(st));
  napi_value out;
  NAPI_OK(napi_create_external(env, w.release(), finalizeWorker, nullptr, &out));
  return out;
}

napi_value WorkerAddress(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  Worker* w = getWorker(env, argv[0]);
  if (!w) return throwErr(env, "ucxWorkerAddress: not a worker");
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  ucs_status_t st;
  {
    std::lock_guard<std::mutex> g(w->mu);
    st = ucp_worker_get_address(w->worker, &addr, &len);
  }
  if (st != UCS_OK) return throwErr(env, std::string("ucp_worker_get_address: ") + ucs_status_string(st));
  napi_value out;
  void* data = nullptr;
  NAPI_OK(napi_create_buffer_copy(env, len, addr, &data, &out));
  ucp_worker_release_address(w->worker, addr);
  return out;
}

napi_value MapRegion(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  Worker* w = getWorker(env, argv[0]);
  if (!w) return throwErr(env, "ucxMapRegion: not a worker");
  int64_t bytes = 0;
  NAPI_OK(napi_get_value_int64(env, argv[1], &bytes));
  if (bytes <= 0) return throwErr(env, "ucxMapRegion: bytes must be positive");
  ucp_mem_map_params_t mp;
  std::memset(&mp, 0, sizeof(mp));
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  mp.length = static_cast<size_t>(bytes);
  mp.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h memh = nullptr;
  ucs_status_t st = ucp_mem_map(w->ctx, &mp, &memh);
  if (st != UCS_OK) return throwErr(env, std::string("ucp_mem_map: ") + ucs_status_string(st));
  ucp_mem_attr_t attr;
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
  st = ucp_mem_query(memh, &attr);
  if (st != UCS_OK) return throwErr(env, std::string("ucp_mem_query: ") + ucs_status_string(st));
  void* rkeyBuf = nullptr;
  size_t rkeyLen = 0;
  st = ucp_rkey_pack(w->ctx, memh, &rkeyBuf, &rkeyLen);
  if (st != UCS_OK) return throwErr(env, std::string("ucp_rkey_pack: ") + ucs_status_string(st));
  w->mems.push_back(memh);
  napi_value obj, ab, addr, rkey;
  NAPI_OK(napi_create_object(env, &obj));
  // the mapped memory lives as long as the worker (the decode server): no finalizer frees it
  NAPI_OK(napi_create_external_arraybuffer(env, attr.address, static_cast<size_t>(bytes), nullptr, nullptr, &ab));
  NAPI_OK(napi_create_bigint_uint64(env, reinterpret_cast<uint64_t>(attr.address), &addr));
  void* d = nullptr;
  NAPI_OK(napi_create_buffer_copy(env, rkeyLen, rkeyBuf, &d, &rkey));
  ucp_rkey_buffer_release(rkeyBuf);
  NAPI_OK(napi_set_named_property(env, obj, "buffer", ab));
  NAPI_OK(napi_set_named_property(env, obj, "address", addr));
  NAPI_OK(napi_set_named_property(env, obj, "rkey", rkey));
  return obj;
}

napi_value StartProgress(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  Worker* w = getWorker(env, argv[0]);
  if (!w) return throwErr(env, "ucxStartProgress: not a worker");
  if (w->progress.joinable()) return nullptr;
  int efd = -1;
  {
    std::lock_guard<std::mutex> g(w->mu);
    if (ucp_worker_get_efd(w->worker, &efd) != UCS_OK) efd = -1;
  }
  w->stop = false;
  w->progress = std::thread([w, efd] {
    // progress while anything moves (TCP puts need the receiver to copy from the socket); when idle for a while,
    // sleep on the worker's event fd (armed: any incoming traffic wakes it) or, without one, in short naps
    int idle = 0;
    while (!w->stop.load(std::memory_order_relaxed)) {
      unsigned n;
      {
        std::lock_guard<std::mutex> g(w->mu);
        n = ucp_worker_progress(w->worker);
      }
      if (n > 0) {
        idle = 0;
        continue;
      }
      if (++idle < 2000) continue;
      ucs_status_t armed = UCS_ERR_UNSUPPORTED;
      if (efd >= 0) {
        std::lock_guard<std::mutex> g(w->mu);
        armed = ucp_worker_arm(w->worker);
      }
      if (armed == UCS_OK) {
        pollfd p{efd, POLLIN, 0};
        poll(&p, 1, 50);  // woken by traffic; 50 ms caps how long a stop request waits
      } else if (armed != UCS_ERR_BUSY) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      idle = 0;
    }
  });
  return nullptr;
}

napi_value StopProgress(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  Worker* w = getWorker(env, argv[0]);
  if (!w) return throwErr(env, "ucxStopProgress: not a worker");
  w->stop = true;
  if (w->progress.joinable()) w->progress.join();
  return nullptr;
}

napi_value Connect(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  Worker* w = getWorker(env, argv[0]);
  if (!w) return throwErr(env, "ucxConnect: not a worker");
  void* data = nullptr;
  size_t len = 0;
  NAPI_OK(napi_get_buffer_info(env, argv[1], &data, &len));
  ucp_ep_params_t ep;
  std::memset(&ep, 0, sizeof(ep));
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = static_cast<const ucp_address_t*>(data);
  ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  auto e = std::make_unique<Ep>();
  ucs_status_t st;
  {
    std::lock_guard<std::mutex> g(w->mu);
    st = ucp_ep_create(w->worker, &ep, &e->ep);
  }
  if (st != UCS_OK) return throwErr(env, std::string("ucp_ep_create: ") + ucs_status_string(st));
  w->eps.push_back(std::move(e));
  napi_value out;
  NAPI_OK(napi_create_uint32(env, static_cast<uint32_t>(w->eps.size() - 1), &out));
  return out;
}

struct PutJob {
  Worker* w;
  Ep* ep;
  std::string rkey;
  uint64_t remote;
  const void* src;
  size_t len;
  napi_ref srcRef;
  napi_deferred deferred;
  napi_async_work work;
  std::string error;
  int64_t timeoutMs;
};

/** Waits for a request from a *_nbx call (progressing the worker), at most `timeoutMs`. */
ucs_status_t waitReq(Worker* w, void* req, int64_t timeoutMs) {
  if (req == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(req)) return UCS_PTR_STATUS(req);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  ucs_status_t st;
  for (;;) {
    {
      std::lock_guard<std::mutex> g(w->mu);
      ucp_worker_progress(w->worker);
      st = ucp_request_check_status(req);
    }
    if (st != UCS_INPROGRESS) break;
    // a peer that stopped progressing (or died, with error mode NONE) must not hold this thread forever; the request
    // is left to UCX (freed with the worker)
    if (std::chrono::steady_clock::now() > deadline) return UCS_ERR_TIMED_OUT;
  }
  ucp_request_free(req);
  return st;
}

void PutExecute(napi_env, void* data) {
  auto* j = static_cast<PutJob*>(data);
  ucp_rkey_h rk = nullptr;
  {
    std::lock_guard<std::mutex> g(j->w->mu);
    auto it = j->ep->rkeys.find(j->rkey);
    if (it != j->ep->rkeys.end()) rk = it->second;
    else {
      ucs_status_t st = ucp_ep_rkey_unpack(j->ep->ep, j->rkey.data(), &rk);
      if (st != UCS_OK) {
        j->error = std::string("ucp_ep_rkey_unpack: ") + ucs_status_string(st);
        return;
      }
      j->ep->rkeys[j->rkey] = rk;
    }
  }
  ucp_request_param_t p;
  std::memset(&p, 0, sizeof(p));
  void* req;
  {
    std::lock_guard<std::mutex> g(j->w->mu);
    req = ucp_put_nbx(j->ep->ep, j->src, j->len, j->remote, rk, &p);
  }
  ucs_status_t st = waitReq(j->w, req, j->timeoutMs);
  if (st != UCS_OK) {
    j->error = std::string("ucp_put_nbx: ") + ucs_status_string(st);
    return;
  }
  {
    std::lock_guard<std::mutex> g(j->w->mu);
    req = ucp_ep_flush_nbx(j->ep->ep, &p);
  }
  st = waitReq(j->w, req, j->timeoutMs);
  if (st != UCS_OK) j->error = std::string("ucp_ep_flush_nbx: ") + ucs_status_string(st);
}

void PutComplete(napi_env env, napi_status, void* data) {
  auto* j = static_cast<PutJob*>(data);
  if (j->error.empty()) {
    napi_value u;
    napi_get_undefined(env, &u);
    napi_resolve_deferred(env, j->deferred, u);
  } else {
    napi_value msg, err;
    napi_create_string_utf8(env, j->error.c_str(), NAPI_AUTO_LENGTH, &msg);
    napi_create_error(env, nullptr, msg, &err);
    napi_reject_deferred(env, j->deferred, err);
  }
  napi_delete_reference(env, j->srcRef);
  napi_delete_async_work(env, j->work);
  delete j;
}

napi_value Put(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6];
  NAPI_OK(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr));
  Worker* w = getWorker(env, argv[0]);
  if (!w) return throwErr(env, "ucxPut: not a worker");
  uint32_t epId = 0;
  NAPI_OK(napi_get_value_uint32(env, argv[1], &epId));
  if (epId >= w->eps.size()) return throwErr(env, "ucxPut: unknown endpoint");
  void* rk = nullptr;
  size_t rkLen = 0;
  NAPI_OK(napi_get_buffer_info(env, argv[2], &rk, &rkLen));
  uint64_t remote = 0;
  bool lossless = false;
  NAPI_OK(napi_get_value_bigint_uint64(env, argv[3], &remote, &lossless));
  napi_typedarray_type tt;
  size_t length = 0, offset = 0;
  void* src = nullptr;
  napi_value ab;
  NAPI_OK(napi_get_typedarray_info(env, argv[4], &tt, &length, &src, &ab, &offset));
  size_t elem = (tt == napi_float32_array || tt == napi_int32_array || tt == napi_uint32_array) ? 4 : (tt == napi_float64_array || tt == napi_bigint64_array || tt == napi_biguint64_array) ? 8 : (tt == napi_int16_array || tt == napi_uint16_array) ? 2 : 1;
  int64_t timeoutMs = 30000;
  if (argc >= 6) napi_get_value_int64(env, argv[5], &timeoutMs);
  auto* j = new PutJob{w, w->eps[epId].get(), std::string(static_cast<char*>(rk), rkLen), remote, src, length * elem, nullptr, nullptr, nullptr, {}, timeoutMs};
  NAPI_OK(napi_create_reference(env, argv[4], 1, &j->srcRef));
  napi_value promise, name;
  NAPI_OK(napi_create_promise(env, &j->deferred, &promise));
  NAPI_OK(napi_create_string_utf8(env, "ucxPut", NAPI_AUTO_LENGTH, &name));
  NAPI_OK(napi_create_async_work(env, nullptr, name, PutExecute, PutComplete, j, &j->work));
  NAPI_OK(napi_queue_async_work(env, j->work));
  return promise;
}

napi_value Info(napi_env env, napi_callback_info) {
  unsigned major = 0, minor = 0, release = 0;
  ucp_get_version(&major, &minor, &release);
  std::string v = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  napi_value obj, s;
  NAPI_OK(napi_create_object(env, &obj));
  NAPI_OK(napi_create_string_utf8(env, v.c_str(), NAPI_AUTO_LENGTH, &s));
  NAPI_OK(napi_set_named_property(env, obj, "version", s));
  return obj;
}

/**
 * Gives back the signals libucs took when it loaded (its error and debug handlers) to the handlers it replaced
 * (Node's), so that a fault is handled by Node: a WebAssembly trap stays a JS RuntimeError. Kept when the environment
 * sets UCX_HANDLE_ERRORS (UCX's crash handling asked for).
 */
void restoreSignalHandlers() {
  if (std::getenv("UCX_HANDLE_ERRORS") != nullptr) return;
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction cur;
    if (sigaction(sig, nullptr, &cur) != 0) continue;
    void* h = (cur.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(cur.sa_sigaction) : reinterpret_cast<void*>(cur.sa_handler);
    if (h == reinterpret_cast<void*>(SIG_DFL) || h == reinterpret_cast<void*>(SIG_IGN)) continue;
    Dl_info di;
    if (dladdr(h, &di) != 0 && di.dli_fname != nullptr && std::strstr(di.dli_fname, "libucs") != nullptr) ucs_debug_disable_signal(sig);
  }
}

napi_value Init(napi_env env, napi_value exports) {
  // (once per process: the module's handlers are process-wide; a second thread loading the addon finds none left)
  restoreSignalHandlers();
  napi_property_descriptor props[] = {
      {"ucxCreateWorker", nullptr, CreateWorker, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"ucxWorkerAddress", nullptr, WorkerAddress, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"ucxMapRegion", nullptr, MapRegion, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"ucxStartProgress", nullptr, StartProgress, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"ucxStopProgress", nullptr, StopProgress, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"ucxConnect", nullptr, Connect, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"ucxPut", nullptr, Put, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"ucxInfo", nullptr, Info, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, Init)
