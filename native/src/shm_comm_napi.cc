// N-API bindings of the shared-memory collectives (shm_comm.h), registered by addon.cc's init. The TypeScript side is
// src/distributed/shm_communicator.ts; it checks shapes and turns a non-zero status into a DistributedError.
//   shmAttach(view: Uint8Array over the group's SharedArrayBuffer, rank, size, slotBytes, spinNs) → handle
//   shmAllReduce(h, f32, timeoutMs) / shmAllGather(h, src, dst, timeoutMs) / shmReduceScatter(h, src, dst, timeoutMs)
//   shmBroadcast(h, buf, root, timeoutMs) / shmAllToAll(h, src, dst, timeoutMs) / shmBarrier(h, timeoutMs) → status
//   shmLastError(h) → {status, missing: number[], abortCode, detail, seq}
//   shmAbort(view, size, code) (any thread); shmAbortCode(view) → the abort word (0 = healthy)
#include <node_api.h>

#include <string>

#include "shm_comm.h"

namespace tsg {

namespace {

struct Handle {
  ShmComm comm;
  napi_ref viewRef;  // keeps the SharedArrayBuffer alive while the handle lives
  ShmStatus last = ShmStatus::kOk;
  Handle(uint8_t* base, int rank, int size, size_t slot, int64_t spin) : comm(base, rank, size, slot, spin), viewRef(nullptr) {}
};

napi_value throwError(napi_env env, const std::string& msg) {
  napi_throw_error(env, "TSGLANG_SHM", ("tsglang shm: " + msg).c_str());
  return nullptr;
}

bool getArgs(napi_env env, napi_callback_info info, size_t n, napi_value* v) {
  size_t argc = n;
  if (napi_get_cb_info(env, info, &argc, v, nullptr, nullptr) != napi_ok || argc < n) {
    throwError(env, "expected " + std::to_string(n) + " arguments");
    return false;
  }
  return true;
}

bool getBytes(napi_env env, napi_value v, uint8_t** data, size_t* bytes, napi_typedarray_type* typeOut = nullptr) {
  napi_typedarray_type type;
  size_t length;
  void* p;
  napi_value ab;
  size_t off;
  if (napi_get_typedarray_info(env, v, &type, &length, &p, &ab, &off) != napi_ok) return false;
  size_t elem = 1;
  switch (type) {
    case napi_float32_array:
    case napi_int32_array:
    case napi_uint32_array: elem = 4; break;
    case napi_int16_array:
    case napi_uint16_array: elem = 2; break;
    case napi_float64_array: elem = 8; break;
    default: elem = 1;
  }
  *data = static_cast<uint8_t*>(p);
  *bytes = length * elem;
  if (typeOut) *typeOut = type;
  return true;
}

/** The layout starts at the first 64-byte boundary of the buffer (the same address on every thread: one allocation). */
void alignBase(uint8_t** base, size_t* bytes) {
  const uintptr_t p = reinterpret_cast<uintptr_t>(*base);
  const size_t skip = static_cast<size_t>(((p + 63) & ~static_cast<uintptr_t>(63)) - p);
  *base += skip;
  *bytes = *bytes > skip ? *bytes - skip : 0;
}

bool getInt(napi_env env, napi_value v, int64_t* out) { return napi_get_value_int64(env, v, out) == napi_ok; }

Handle* getHandle(napi_env env, napi_value v) {
  void* p = nullptr;
  if (napi_get_value_external(env, v, &p) != napi_ok || p == nullptr) {
    throwError(env, "expected a communicator handle");
    return nullptr;
  }
  return static_cast<Handle*>(p);
}

napi_value status(napi_env env, Handle* h, ShmStatus s) {
  h->last = s;
  napi_value out;
  napi_create_int32(env, static_cast<int32_t>(s), &out);
  return out;
}

napi_value shmAttach(napi_env env, napi_callback_info info) {
  napi_value v[5];
  if (!getArgs(env, info, 5, v)) return nullptr;
  uint8_t* base;
  size_t bytes;
  int64_t rank, size, slot, spin;
  if (!getBytes(env, v[0], &base, &bytes)) return throwError(env, "shmAttach needs a Uint8Array over the group's memory");
  if (!getInt(env, v[1], &rank) || !getInt(env, v[2], &size) || !getInt(env, v[3], &slot) || !getInt(env, v[4], &spin))
    return throwError(env, "shmAttach(view, rank, size, slotBytes, spinNs) takes integers");
  if (size < 1 || rank < 0 || rank >= size || slot < 64 || slot % 64 != 0 || slot > (1LL << 30))
    return throwError(env, "bad rank/size/slotBytes");
  alignBase(&base, &bytes);
  if (bytes < shmTotalBytes(static_cast<int>(size), static_cast<size_t>(slot)))
    return throwError(env, "group memory is smaller than the layout needs");
  auto* h = new Handle(base, static_cast<int>(rank), static_cast<int>(size), static_cast<size_t>(slot), spin);
  napi_create_reference(env, v[0], 1, &h->viewRef);
  napi_value out;
  napi_create_external(
      env, h,
      [](napi_env e, void* d, void*) {
        auto* hh = static_cast<Handle*>(d);
        if (hh->viewRef) napi_delete_reference(e, hh->viewRef);
        delete hh;
      },
      nullptr, &out);
  return out;
}

napi_value shmAllReduce(napi_env env, napi_callback_info info) {
  napi_value v[3];
  if (!getArgs(env, info, 3, v)) return nullptr;
  Handle* h = getHandle(env, v[0]);
  if (!h) return nullptr;
  uint8_t* p;
  size_t bytes;
  napi_typedarray_type t;
  int64_t timeout;
  if (!getBytes(env, v[1], &p, &bytes, &t) || t != napi_float32_array) return throwError(env, "allReduceSum needs a Float32Array");
  if (!getInt(env, v[2], &timeout)) return throwError(env, "timeoutMs must be an integer");
  return status(env, h, h->comm.allReduceSum(reinterpret_cast<float*>(p), bytes / 4, timeout));
}

napi_value shmAllGather(napi_env env, napi_callback_info info) {
  napi_value v[4];
  if (!getArgs(env, info, 4, v)) return nullptr;
  Handle* h = getHandle(env, v[0]);
  if (!h) return nullptr;
  uint8_t *s, *d;
  size_t sb, db;
  int64_t timeout;
  if (!getBytes(env, v[1], &s, &sb) || !getBytes(env, v[2], &d, &db)) return throwError(env, "allGather needs typed arrays");
  if (db != sb * static_cast<size_t>(h->comm.size())) return throwError(env, "allGather: dst must hold size × src");
  if (!getInt(env, v[3], &timeout)) return throwError(env, "timeoutMs must be an integer");
  return status(env, h, h->comm.allGather(s, sb, d, timeout));
}

napi_value shmReduceScatter(napi_env env, napi_callback_info info) {
  napi_value v[4];
  if (!getArgs(env, info, 4, v)) return nullptr;
  Handle* h = getHandle(env, v[0]);
  if (!h) return nullptr;
  uint8_t *s, *d;
  size_t sb, db;
  napi_typedarray_type ts, td;
  int64_t timeout;
  if (!getBytes(env, v[1], &s, &sb, &ts) || !getBytes(env, v[2], &d, &db, &td) || ts != napi_float32_array || td != napi_float32_array)
    return throwError(env, "reduceScatterSum needs Float32Arrays");
  if (sb != db * static_cast<size_t>(h->comm.size())) return throwError(env, "reduceScatterSum: src must hold size × dst");
  if (!getInt(env, v[3], &timeout)) return throwError(env, "timeoutMs must be an integer");
  return status(env, h, h->comm.reduceScatterSum(reinterpret_cast<float*>(s), db / 4, reinterpret_cast<float*>(d), timeout));
}

napi_value shmBroadcast(napi_env env, napi_callback_info info) {
  napi_value v[4];
  if (!getArgs(env, info, 4, v)) return nullptr;
  Handle* h = getHandle(env, v[0]);
  if (!h) return nullptr;
  uint8_t* p;
  size_t bytes;
  int64_t root, timeout;
  if (!getBytes(env, v[1], &p, &bytes)) return throwError(env, "broadcast needs a typed array");
  if (!getInt(env, v[2], &root) || root < 0 || root >= h->comm.size()) return throwError(env, "broadcast: bad root");
  if (!getInt(env, v[3], &timeout)) return throwError(env, "timeoutMs must be an integer");
  return status(env, h, h->comm.broadcast(p, bytes, static_cast<int>(root), timeout));
}

napi_value shmAllToAll(napi_env env, napi_callback_info info) {
  napi_value v[4];
  if (!getArgs(env, info, 4, v)) return nullptr;
  Handle* h = getHandle(env, v[0]);
  if (!h) return nullptr;
  uint8_t *s, *d;
  size_t sb, db;
  int64_t timeout;
  if (!getBytes(env, v[1], &s, &sb) || !getBytes(env, v[2], &d, &db)) return throwError(env, "allToAll needs typed arrays");
  const size_t n = static_cast<size_t>(h->comm.size());
  if (sb != db || sb % n != 0) return throwError(env, "allToAll: src and dst must both hold size × block");
  if (!getInt(env, v[3], &timeout)) return throwError(env, "timeoutMs must be an integer");
  return status(env, h, h->comm.allToAll(s, sb / n, d, timeout));
}

napi_value shmBarrier(napi_env env, napi_callback_info info) {
  napi_value v[2];
  if (!getArgs(env, info, 2, v)) return nullptr;
  Handle* h = getHandle(env, v[0]);
  if (!h) return nullptr;
  int64_t timeout;
  if (!getInt(env, v[1], &timeout)) return throwError(env, "timeoutMs must be an integer");
  return status(env, h, h->comm.barrier(timeout));
}

napi_value shmLastError(napi_env env, napi_callback_info info) {
  napi_value v[1];
  if (!getArgs(env, info, 1, v)) return nullptr;
  Handle* h = getHandle(env, v[0]);
  if (!h) return nullptr;
  napi_value obj, st, arr, ab, det, seq;
  napi_create_object(env, &obj);
  napi_create_int32(env, static_cast<int32_t>(h->last), &st);
  napi_set_named_property(env, obj, "status", st);
  napi_create_array_with_length(env, h->comm.missing().size(), &arr);
  for (size_t i = 0; i < h->comm.missing().size(); ++i) {
    napi_value x;
    napi_create_int32(env, h->comm.missing()[i], &x);
    napi_set_element(env, arr, static_cast<uint32_t>(i), x);
  }
  napi_set_named_property(env, obj, "missing", arr);
  napi_create_int32(env, h->comm.abortCode(), &ab);
  napi_set_named_property(env, obj, "abortCode", ab);
  napi_create_string_utf8(env, h->comm.detail().c_str(), NAPI_AUTO_LENGTH, &det);
  napi_set_named_property(env, obj, "detail", det);
  napi_create_uint32(env, h->comm.seq(), &seq);
  napi_set_named_property(env, obj, "seq", seq);
  return obj;
}

napi_value shmAbort(napi_env env, napi_callback_info info) {
  napi_value v[3];
  if (!getArgs(env, info, 3, v)) return nullptr;
  uint8_t* base;
  size_t bytes;
  int64_t size, code;
  if (!getBytes(env, v[0], &base, &bytes) || !getInt(env, v[1], &size) || !getInt(env, v[2], &code))
    return throwError(env, "shmAbort(view, size, code)");
  alignBase(&base, &bytes);
  if (size < 1 || bytes < shmDataOffset(static_cast<int>(size)) || code == 0) return throwError(env, "shmAbort: bad arguments");
  ShmComm::abort(base, static_cast<int>(size), static_cast<int32_t>(code));
  return nullptr;
}

napi_value shmAbortCode(napi_env env, napi_callback_info info) {
  napi_value v[1];
  if (!getArgs(env, info, 1, v)) return nullptr;
  uint8_t* base;
  size_t bytes;
  if (!getBytes(env, v[0], &base, &bytes)) return throwError(env, "shmAbortCode(view)");
  alignBase(&base, &bytes);
  if (bytes < kShmLine) return throwError(env, "shmAbortCode: bad view");
  napi_value out;
  napi_create_int32(env, ShmComm::abortWord(base), &out);
  return out;
}

}  // namespace

void registerShmComm(napi_env env, napi_value exports) {
  const napi_property_descriptor props[] = {
      {"shmAttach", nullptr, shmAttach, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"shmAllReduce", nullptr, shmAllReduce, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"shmAllGather", nullptr, shmAllGather, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"shmReduceScatter", nullptr, shmReduceScatter, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"shmBroadcast", nullptr, shmBroadcast, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"shmAllToAll", nullptr, shmAllToAll, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"shmBarrier", nullptr, shmBarrier, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"shmLastError", nullptr, shmLastError, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"shmAbortCode", nullptr, shmAbortCode, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"shmAbort", nullptr, shmAbort, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
}

}  // namespace tsg
