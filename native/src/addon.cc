// N-API bindings of the native backend (plain C N-API, no node-addon-api). Argument shapes are checked on the TS
// side (src/kernels/native/native_ops.ts); here we check only what would otherwise read or write out of bounds.
#include <node_api.h>

#include <cmath>
#include <string>
#include <vector>

#include "fused_sampling.h"
#include "gemm.h"
#include "huge_pages.h"
#include "mla_dsa.h"
#include "ops.h"
#include "sampling.h"
#include "thread_pool.h"

namespace tsg {
/** Registers the shared-memory collectives (shm_comm_napi.cc). */
void registerShmComm(napi_env env, napi_value exports);
}  // namespace tsg

namespace {

using tsg::ThreadPool;
using tsg::WeightView;
using tsg::WFormat;

struct Failure {
  std::string msg;
};

void check(napi_env env, napi_status s, const char* what) {
  if (s != napi_ok) throw Failure{std::string("tsglang_native: ") + what};
}

struct Args {
  napi_env env;
  std::vector<napi_value> v;
  Args(napi_env e, napi_callback_info info, size_t n) : env(e), v(n) {
    size_t argc = n;
    check(e, napi_get_cb_info(e, info, &argc, v.data(), nullptr, nullptr), "bad call");
    if (argc < n) throw Failure{"tsglang_native: expected " + std::to_string(n) + " arguments"};
  }
  bool isNull(size_t i) const {
    napi_valuetype t;
    napi_typeof(env, v[i], &t);
    return t == napi_null || t == napi_undefined;
  }
  double num(size_t i) const {
    double d;
    check(env, napi_get_value_double(env, v[i], &d), "expected a number");
    return d;
  }
  int64_t i64(size_t i) const {
    int64_t d;
    check(env, napi_get_value_int64(env, v[i], &d), "expected an integer");
    return d;
  }
  bool boolean(size_t i) const {
    bool b;
    check(env, napi_get_value_bool(env, v[i], &b), "expected a boolean");
    return b;
  }
  template <class T>
  T* typed(size_t i, napi_typedarray_type want, int64_t* len) const {
    napi_typedarray_type type;
    size_t length;
    void* data;
    napi_value ab;
    size_t off;
    if (napi_get_typedarray_info(env, v[i], &type, &length, &data, &ab, &off) != napi_ok || type != want)
      throw Failure{"tsglang_native: argument " + std::to_string(i) + " has the wrong typed-array type"};
    if (len) *len = static_cast<int64_t>(length);
    return static_cast<T*>(data);
  }
  float* f32(size_t i, int64_t* len = nullptr) const { return typed<float>(i, napi_float32_array, len); }
  int32_t* i32(size_t i, int64_t* len = nullptr) const { return typed<int32_t>(i, napi_int32_array, len); }
  double* f64(size_t i, int64_t* len = nullptr) const { return typed<double>(i, napi_float64_array, len); }
  template <class T>
  T* external(size_t i) const {
    void* p;
    check(env, napi_get_value_external(env, v[i], &p), "expected a native handle");
    return static_cast<T*>(p);
  }
};

/** A pool plus the GEMM mode of one NativeOps instance. */
struct Backend {
  ThreadPool pool;
  tsg::GemmOptions gemm;
  explicit Backend(int threads) : pool(threads) {}
};

/** A weight handle: the view plus strong references keeping the JS arrays alive. */
struct WeightHandle {
  WeightView view;
  std::vector<float> scaleEff;
  napi_ref dataRef = nullptr;
  napi_ref scaleRef = nullptr;
};

napi_value wrap(napi_env env, napi_callback_info info, napi_value (*fn)(napi_env, napi_callback_info)) {
  try {
    return fn(env, info);
  } catch (const Failure& f) {
    napi_throw_error(env, "TSGLANG_NATIVE", f.msg.c_str());
  } catch (const std::exception& e) {
    napi_throw_error(env, "TSGLANG_NATIVE", (std::string("tsglang_native: ") + e.what()).c_str());
  }
  return nullptr;
}

#define EXPORT_FN(name)                                                                   \
  napi_value name##_impl(napi_env env, napi_callback_info info);                          \
  napi_value name(napi_env env, napi_callback_info info) { return wrap(env, info, name##_impl); } \
  napi_value name##_impl(napi_env env, napi_callback_info info)

napi_value undefinedValue(napi_env env) {
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

/**
 * The paged batch of attention / indexerTopK: five int32 arrays at argument positions first..first+4
 * (extendStartLoc, extendSeqLens, extendPrefixLens, reqPoolIndices, reqToToken).
 * @throws Failure when a per-request array is shorter than numReqs
 */
tsg::PagedBatch readPagedBatch(const Args& a, size_t first, int64_t numReqs, int64_t reqToTokenStride, const char* op) {
  tsg::PagedBatch b;
  int64_t n0, n1, n2, n3, tl;
  b.numReqs = numReqs;
  b.reqToTokenStride = reqToTokenStride;
  b.extendStartLoc = a.i32(first, &n0);
  b.extendSeqLens = a.i32(first + 1, &n1);
  b.extendPrefixLens = a.i32(first + 2, &n2);
  b.reqPoolIndices = a.i32(first + 3, &n3);
  b.reqToToken = a.i32(first + 4, &tl);
  b.reqToTokenLen = tl;
  if (n0 < numReqs || n1 < numReqs || n2 < numReqs || n3 < numReqs)
    throw Failure{std::string("tsglang_native: ") + op + " batch arrays shorter than numReqs"};
  return b;
}

// createBackend(threads, gemmMode, blasMinM) → handle
EXPORT_FN(createBackend) {
  Args a(env, info, 3);
  auto* b = new Backend(static_cast<int>(a.i64(0)));
  b->gemm.mode = a.i64(1) == 1 && tsg::blasAvailable() ? tsg::GemmMode::kBlas : tsg::GemmMode::kOwn;
  b->gemm.blasMinM = a.i64(2);
  napi_value out;
  check(env, napi_create_external(env, b, [](napi_env, void* d, void*) { delete static_cast<Backend*>(d); }, nullptr, &out), "external");
  return out;
}

// info() → {blas, threadsMax}
EXPORT_FN(buildInfo) {
  (void)info;
  napi_value obj, blas, ver;
  napi_create_object(env, &obj);
  napi_get_boolean(env, tsg::blasAvailable(), &blas);
  napi_set_named_property(env, obj, "blas", blas);
  napi_create_string_utf8(env, "avx2+fma+f16c", NAPI_AUTO_LENGTH, &ver);
  napi_set_named_property(env, obj, "isa", ver);
  return obj;
}

// makeWeight(format, data, N, K, scale|null, sRows, sCols, bn, bk) → handle
EXPORT_FN(makeWeight) {
  Args a(env, info, 9);
  auto h = std::make_unique<WeightHandle>();
  const int64_t fmt = a.i64(0);
  const int64_t n = a.i64(2), k = a.i64(3);
  napi_typedarray_type type;
  size_t length;
  void* data;
  napi_value ab;
  size_t off;
  check(env, napi_get_typedarray_info(env, a.v[1], &type, &length, &data, &ab, &off), "weight data must be a typed array");
  const napi_typedarray_type want = fmt == 0 ? napi_float32_array : fmt == 3 ? napi_uint8_array : napi_uint16_array;
  if (type != want) throw Failure{"tsglang_native: weight data has the wrong typed-array type for its format"};
  if (static_cast<int64_t>(length) < n * k) throw Failure{"tsglang_native: weight data shorter than N*K"};
  h->view.fmt = static_cast<WFormat>(fmt);
  h->view.data = data;
  h->view.n = n;
  h->view.k = k;
  check(env, napi_create_reference(env, a.v[1], 1, &h->dataRef), "ref");
  if (fmt == 3) {
    int64_t slen;
    const float* s = a.f32(4, &slen);
    h->view.sRows = a.i64(5);
    h->view.sCols = a.i64(6);
    h->view.bn = a.i64(7);
    h->view.bk = a.i64(8);
    if (h->view.bn <= 0 || h->view.bk <= 0 || h->view.sRows != (n + h->view.bn - 1) / h->view.bn ||
        h->view.sCols != (k + h->view.bk - 1) / h->view.bk || slen < h->view.sRows * h->view.sCols)
      throw Failure{"tsglang_native: FP8 scale shape does not cover the weight"};
    h->view.scale = s;
    check(env, napi_create_reference(env, a.v[4], 1, &h->scaleRef), "ref");
    bool ok = true;
    h->scaleEff.resize(h->view.sRows * h->view.sCols);
    for (size_t i = 0; i < h->scaleEff.size(); i++) {
      const float v = s[i] * tsg::kFp8ScaleEff;
      if (!std::isfinite(v)) ok = false;
      h->scaleEff[i] = v;
    }
    h->view.scaleEff = ok ? h->scaleEff.data() : nullptr;
  }
  napi_value out;
  check(env, napi_create_external(env, h.get(), [](napi_env e, void* d, void*) {
    auto* w = static_cast<WeightHandle*>(d);
    if (w->dataRef) napi_delete_reference(e, w->dataRef);
    if (w->scaleRef) napi_delete_reference(e, w->scaleRef);
    delete w;
  }, nullptr, &out), "external");
  h.release();
  return out;
}

// matmul(backend, x, M, weight, out)
EXPORT_FN(matmul) {
  Args a(env, info, 5);
  auto* b = a.external<Backend>(0);
  int64_t xl, yl;
  const float* x = a.f32(1, &xl);
  const int64_t m = a.i64(2);
  const WeightView& w = a.external<WeightHandle>(3)->view;
  float* y = a.f32(4, &yl);
  if (xl < m * w.k || yl < m * w.n) throw Failure{"tsglang_native: matmul buffers too small"};
  tsg::matmul(b->pool, x, m, w.k, w, y, w.n, b->gemm);
  return undefinedValue(env);
}

// embedding(backend, ids, table, out)
EXPORT_FN(embedding) {
  Args a(env, info, 4);
  auto* b = a.external<Backend>(0);
  int64_t n, yl;
  const int32_t* ids = a.i32(1, &n);
  const WeightView& w = a.external<WeightHandle>(2)->view;
  float* y = a.f32(3, &yl);
  if (yl < n * w.k) throw Failure{"tsglang_native: embedding out too small"};
  if (!tsg::embedding(b->pool, ids, n, w, y)) throw Failure{"tsglang_native: embedding id outside the table"};
  return undefinedValue(env);
}

// rmsNorm(backend, x, rows, width, xStride, w, eps, out)
EXPORT_FN(rmsNorm) {
  Args a(env, info, 8);
  auto* b = a.external<Backend>(0);
  int64_t xl, wl, yl;
  const float* x = a.f32(1, &xl);
  const int64_t rows = a.i64(2), width = a.i64(3), stride = a.i64(4);
  const float* w = a.f32(5, &wl);
  float* y = a.f32(7, &yl);
  if (rows > 0 && (xl < (rows - 1) * stride + width || wl < width || yl < rows * width)) throw Failure{"tsglang_native: rmsNorm buffers too small"};
  tsg::rmsNorm(b->pool, x, rows, width, stride, w, a.num(6), y);
  return undefinedValue(env);
}

// layerNorm(backend, x, rows, width, w, bias, eps, out)
EXPORT_FN(layerNorm) {
  Args a(env, info, 8);
  auto* b = a.external<Backend>(0);
  int64_t xl, wl, bl, yl;
  const float* x = a.f32(1, &xl);
  const int64_t rows = a.i64(2), width = a.i64(3);
  const float* w = a.f32(4, &wl);
  const float* bias = a.f32(5, &bl);
  float* y = a.f32(7, &yl);
  if (xl < rows * width || wl < width || bl < width || yl < rows * width) throw Failure{"tsglang_native: layerNorm buffers too small"};
  tsg::layerNorm(b->pool, x, rows, width, w, bias, a.num(6), y);
  return undefinedValue(env);
}

// softmax(backend, x, rows, width, out)
EXPORT_FN(softmax) {
  Args a(env, info, 5);
  auto* b = a.external<Backend>(0);
  int64_t xl, yl;
  const float* x = a.f32(1, &xl);
  const int64_t rows = a.i64(2), width = a.i64(3);
  float* y = a.f32(4, &yl);
  if (xl < rows * width || yl < rows * width) throw Failure{"tsglang_native: softmax buffers too small"};
  tsg::softmax(b->pool, x, rows, width, y);
  return undefinedValue(env);
}

// elementwise(kind, a, b|null, out): 0 add, 1 sigmoid, 2 siluAndMul
EXPORT_FN(elementwise) {
  Args a(env, info, 4);
  const int64_t kind = a.i64(0);
  int64_t n, ol;
  const float* x = a.f32(1, &n);
  float* y = a.f32(3, &ol);
  if (ol < n) throw Failure{"tsglang_native: elementwise out too small"};
  if (kind == 1) {
    tsg::sigmoidArray(x, y, n);
  } else {
    int64_t bl;
    const float* x2 = a.f32(2, &bl);
    if (bl < n) throw Failure{"tsglang_native: elementwise operands differ in length"};
    if (kind == 0) tsg::addArrays(x, x2, y, n);
    else tsg::siluAndMulArray(x, x2, y, n);
  }
  return undefinedValue(env);
}

// rope(backend, x, T, positions, numHeads, headDim, rowStride, offset, invFreq, rotaryDim, interleaved, mscale)
EXPORT_FN(rope) {
  Args a(env, info, 12);
  auto* b = a.external<Backend>(0);
  int64_t xl, pl, fl;
  float* x = a.f32(1, &xl);
  const int64_t t = a.i64(2);
  const int32_t* pos = a.i32(3, &pl);
  const int64_t heads = a.i64(4), headDim = a.i64(5), stride = a.i64(6), offset = a.i64(7);
  const float* inv = a.f32(8, &fl);
  const int64_t rd = a.i64(9);
  if (pl < t || fl < rd / 2 || (t > 0 && xl < (t - 1) * stride + (heads - 1) * headDim + offset + rd))
    throw Failure{"tsglang_native: rope buffers too small"};
  tsg::rope(b->pool, x, t, pos, heads, headDim, stride, offset, inv, rd, a.boolean(10), a.num(11));
  return undefinedValue(env);
}

// topk(backend, x, rows, width, k, outIdx, outVal)
EXPORT_FN(topk) {
  Args a(env, info, 7);
  auto* b = a.external<Backend>(0);
  int64_t xl, il, vl;
  const float* x = a.f32(1, &xl);
  const int64_t rows = a.i64(2), width = a.i64(3), k = a.i64(4);
  int32_t* idx = a.i32(5, &il);
  float* val = a.f32(6, &vl);
  if (xl < rows * width || il < rows * k || vl < rows * k || k < 1 || k > width) throw Failure{"tsglang_native: topk bad sizes"};
  tsg::topk(b->pool, x, rows, width, k, idx, val);
  return undefinedValue(env);
}

/**
 * A KV buffer's row layout from kvInts[at..at+2] = [kind, rowFloats, fp8Dims] and its scale (src/common/kv_dtype.ts).
 * @throws Failure for an unknown kind or a row too short for `width` elements
 */
tsg::KvLayout readKvLayout(const int32_t* kvInts, int at, float scale, int64_t width) {
  tsg::KvLayout l;
  l.kind = kvInts[at];
  l.rowBytes = static_cast<int64_t>(kvInts[at + 1]) * 4;
  l.scale = scale;
  l.fp8Dims = kvInts[at + 2];
  l.scaleOff = (l.fp8Dims + 3) / 4 * 4;
  l.tailOff = l.scaleOff + 4 * ((l.fp8Dims + 127) / 128);
  int64_t need = 0;
  switch (l.kind) {
    case tsg::KV_F32: need = 4 * width; break;
    case tsg::KV_BF16: need = 2 * width; break;
    case tsg::KV_FP8_E4M3: case tsg::KV_FP8_E5M2: need = width; break;
    case tsg::KV_FP8_BLOCK:
      if (l.fp8Dims < 0 || l.fp8Dims > width || l.fp8Dims % 8 != 0) throw Failure{"tsglang_native: fp8_block KV with a bad fp8Dims"};
      need = l.tailOff + 2 * (width - l.fp8Dims);
      break;
    default: throw Failure{"tsglang_native: unknown KV codec"};
  }
  if (l.rowBytes < need || l.rowBytes <= 0) throw Failure{"tsglang_native: KV row bytes too small for its width"};
  return l;
}

// attention(backend, q, T, ints[numHeads,numKvHeads,headDim,vHeadDim,kRowWidth,kOffset,vRowWidth,vOffset,numReqs,stride,sparseWidth],
//           scale, kBuf, vBuf, extendStartLoc, extendSeqLens, extendPrefixLens, reqPoolIndices, reqToToken, sparse|null, out,
//           kvInts[kKind, kRowFloats, kFp8Dims, vKind, vRowFloats, vFp8Dims], kvScales[kScale, vScale])
// kBuf / vBuf: the raw storage (Float32Array) of rows in their codec; kRowWidth / vRowWidth: elements per row.
EXPORT_FN(attention) {
  Args a(env, info, 16);
  auto* b = a.external<Backend>(0);
  int64_t ql, kl, vl, ol, il;
  const float* q = a.f32(1, &ql);
  const int64_t T = a.i64(2);
  const int32_t* ints = a.i32(3, &il);
  if (il < 11) throw Failure{"tsglang_native: attention int params"};
  tsg::AttentionArgs p{};
  p.numHeads = ints[0];
  p.numKvHeads = ints[1];
  p.headDim = ints[2];
  p.vHeadDim = ints[3];
  p.kRowWidth = ints[4];
  p.kOffset = ints[5];
  p.vRowWidth = ints[6];
  p.vOffset = ints[7];
  p.sparseWidth = ints[10];
  p.scale = static_cast<float>(a.num(4));
  p.k = reinterpret_cast<const uint8_t*>(a.f32(5, &kl));
  p.v = reinterpret_cast<const uint8_t*>(a.f32(6, &vl));
  p.batch = readPagedBatch(a, 7, ints[8], ints[9], "attention");
  float* out = a.f32(13, &ol);
  int64_t kvl, scl;
  const int32_t* kvInts = a.i32(14, &kvl);
  const float* kvScales = a.f32(15, &scl);
  if (kvl < 6 || scl < 2) throw Failure{"tsglang_native: attention KV layout params"};
  if (ql < T * p.numHeads * p.headDim || ol < T * p.numHeads * p.vHeadDim) throw Failure{"tsglang_native: attention q/out too small"};
  const int64_t kNeed = p.kOffset + p.numKvHeads * p.headDim, vNeed = p.vOffset + p.numKvHeads * p.vHeadDim;
  if (kNeed > p.kRowWidth || vNeed > p.vRowWidth) throw Failure{"tsglang_native: attention heads exceed the K/V row width"};
  p.kLayout = readKvLayout(kvInts, 0, kvScales[0], p.kRowWidth);
  p.vLayout = readKvLayout(kvInts, 3, kvScales[1], p.vRowWidth);
  // whole rows only (a row's tail may be read as a full 8-lane vector of its own bytes)
  p.kLocs = (kl * 4) / p.kLayout.rowBytes;
  p.vLocs = (vl * 4) / p.vLayout.rowBytes;
  if (!a.isNull(12)) {
    int64_t sl;
    p.sparse = a.i32(12, &sl);
    if (sl < T * p.sparseWidth) throw Failure{"tsglang_native: sparse indices shorter than T*width"};
  }
  const std::string err = tsg::attention(b->pool, q, T, p, out);
  if (!err.empty()) throw Failure{"tsglang_native: " + err};
  return undefinedValue(env);
}

// groupedMatmul(backend, x, M, weight, ints[groups, xRowStride, xGroupStride, outRowStride, outGroupStride], out)
EXPORT_FN(groupedMatmul) {
  Args a(env, info, 6);
  auto* b = a.external<Backend>(0);
  int64_t xl, il, yl;
  const float* x = a.f32(1, &xl);
  const int64_t m = a.i64(2);
  const WeightView& w = a.external<WeightHandle>(3)->view;
  const int32_t* ints = a.i32(4, &il);
  float* y = a.f32(5, &yl);
  if (il < 5) throw Failure{"tsglang_native: groupedMatmul int params"};
  const int64_t groups = ints[0];
  if (groups < 1 || w.n % groups != 0) throw Failure{"tsglang_native: groupedMatmul groups do not divide the weight rows"};
  const tsg::GroupedLayout l{ints[1], ints[2], ints[3], ints[4]};
  const int64_t n = w.n / groups;
  if (l.xRowStride < 0 || l.xGroupStride < 0 || l.outRowStride < 0 || l.outGroupStride < 0) throw Failure{"tsglang_native: groupedMatmul negative stride"};
  if (m > 0 && (xl < (m - 1) * l.xRowStride + (groups - 1) * l.xGroupStride + w.k || yl < (m - 1) * l.outRowStride + (groups - 1) * l.outGroupStride + n))
    throw Failure{"tsglang_native: groupedMatmul buffers too small"};
  tsg::groupedMatmul(b->pool, x, m, groups, w, l, y);
  return undefinedValue(env);
}

// indexerTopK(backend, q, weights, T, ints[numHeads, headDim, topK, kRowWidth, numReqs, stride], kBuf, extendStartLoc,
//             extendSeqLens, extendPrefixLens, reqPoolIndices, reqToToken, out, kvInts[kind, rowFloats, fp8Dims], scale)
EXPORT_FN(indexerTopK) {
  Args a(env, info, 14);
  auto* b = a.external<Backend>(0);
  int64_t ql, wl, il, kl, ol;
  const float* q = a.f32(1, &ql);
  const float* wts = a.f32(2, &wl);
  const int64_t T = a.i64(3);
  const int32_t* ints = a.i32(4, &il);
  if (il < 6) throw Failure{"tsglang_native: indexerTopK int params"};
  tsg::IndexerArgs p{};
  p.numHeads = ints[0];
  p.headDim = ints[1];
  p.topK = ints[2];
  p.kRowWidth = ints[3];
  p.k = reinterpret_cast<const uint8_t*>(a.f32(5, &kl));
  p.batch = readPagedBatch(a, 6, ints[4], ints[5], "indexerTopK");
  int32_t* out = a.i32(11, &ol);
  if (p.numHeads < 1 || p.headDim < 1 || p.topK < 1 || p.kRowWidth < p.headDim) throw Failure{"tsglang_native: indexerTopK bad geometry"};
  if (ol < T * p.topK) throw Failure{"tsglang_native: indexerTopK out too small"};
  int64_t kvl;
  const int32_t* kvInts = a.i32(12, &kvl);
  if (kvl < 3) throw Failure{"tsglang_native: indexerTopK KV layout params"};
  p.kLayout = readKvLayout(kvInts, 0, static_cast<float>(a.num(13)), p.kRowWidth);
  p.kLocs = (kl * 4) / p.kLayout.rowBytes;
  p.qLen = ql;
  p.wLen = wl;
  const std::string err = tsg::indexerTopK(b->pool, q, wts, T, p, out);
  if (!err.empty()) throw Failure{"tsglang_native: " + err};
  return undefinedValue(env);
}

// fusedMoe(backend, x, T, D, experts: (null | [gate, up, down])[], topkIds, topkWeights, topK, out)
EXPORT_FN(fusedMoe) {
  Args a(env, info, 9);
  auto* b = a.external<Backend>(0);
  int64_t xl, il, wl, ol;
  const float* x = a.f32(1, &xl);
  const int64_t T = a.i64(2), D = a.i64(3), topK = a.i64(7);
  const int32_t* ids = a.i32(5, &il);
  const float* tw = a.f32(6, &wl);
  float* out = a.f32(8, &ol);
  if (xl < T * D || il < T * topK || wl < T * topK || ol < T * D) throw Failure{"tsglang_native: fusedMoe buffers too small"};
  uint32_t numExperts;
  check(env, napi_get_array_length(env, a.v[4], &numExperts), "experts must be an array");
  std::vector<tsg::ExpertView> experts(numExperts, tsg::ExpertView{nullptr, nullptr, nullptr});
  std::vector<char> used(numExperts, 0);
  for (int64_t i = 0; i < T * topK; i++)
    if (ids[i] >= 0 && ids[i] < static_cast<int32_t>(numExperts)) used[ids[i]] = 1;
  for (uint32_t e = 0; e < numExperts; e++) {
    if (!used[e]) continue;
    napi_value item;
    check(env, napi_get_element(env, a.v[4], e, &item), "expert");
    napi_valuetype t;
    napi_typeof(env, item, &t);
    if (t == napi_null || t == napi_undefined) continue;
    napi_value g, u, d;
    check(env, napi_get_element(env, item, 0, &g), "expert gate");
    check(env, napi_get_element(env, item, 1, &u), "expert up");
    check(env, napi_get_element(env, item, 2, &d), "expert down");
    void *pg, *pu, *pd;
    check(env, napi_get_value_external(env, g, &pg), "expert gate handle");
    check(env, napi_get_value_external(env, u, &pu), "expert up handle");
    check(env, napi_get_value_external(env, d, &pd), "expert down handle");
    experts[e] = tsg::ExpertView{&static_cast<WeightHandle*>(pg)->view, &static_cast<WeightHandle*>(pu)->view,
                                 &static_cast<WeightHandle*>(pd)->view};
  }
  const std::string err = tsg::fusedMoe(b->pool, x, T, D, experts, ids, tw, topK, out);
  if (!err.empty()) throw Failure{"tsglang_native: " + err};
  return undefinedValue(env);
}

// measureFmaPeak(backend, seconds) → GFLOP/s
EXPORT_FN(measureFmaPeak) {
  Args a(env, info, 2);
  const double g = tsg::measureFmaPeak(a.external<Backend>(0)->pool, a.num(1));
  napi_value out;
  napi_create_double(env, g, &out);
  return out;
}

// measureReadBandwidth(backend, bytes, reps) → GB/s
EXPORT_FN(measureReadBandwidth) {
  Args a(env, info, 3);
  const double g = tsg::measureReadBandwidth(a.external<Backend>(0)->pool, a.i64(1), static_cast<int>(a.i64(2)));
  napi_value out;
  napi_create_double(env, g, &out);
  return out;
}

// argmaxF32(s: f32, n) → index of the largest s[i], first among equals (sampling.h)
EXPORT_FN(argmaxF32) {
  Args a(env, info, 2);
  int64_t sl;
  const float* s = a.f32(0, &sl);
  const int64_t n = a.i64(1);
  if (n < 0 || sl < n) throw Failure{"tsglang_native: argmaxF32 buffer too small"};
  napi_value out;
  napi_create_int64(env, tsg::argmaxF32(s, n), &out);
  return out;
}

// scaleMaxF32(s: f32, n, invT) → max: s[i] = f32(s[i] · invT) in place (sampling.h)
EXPORT_FN(scaleMaxF32) {
  Args a(env, info, 3);
  int64_t sl;
  float* s = a.f32(0, &sl);
  const int64_t n = a.i64(1);
  if (n < 0 || sl < n) throw Failure{"tsglang_native: scaleMaxF32 buffer too small"};
  napi_value out;
  napi_create_double(env, tsg::scaleMaxF32(s, n, a.num(2)), &out);
  return out;
}

// expShiftSum(s: f32, n, shift, E: f64) → Σ E: E[i] = exp(s[i] − shift), Math.exp-identical (sampling.h)
EXPORT_FN(expShiftSum) {
  Args a(env, info, 4);
  int64_t sl, el;
  const float* s = a.f32(0, &sl);
  const int64_t n = a.i64(1);
  double* e = a.f64(3, &el);
  if (n < 0 || sl < n || el < n) throw Failure{"tsglang_native: expShiftSum buffers too small"};
  napi_value out;
  napi_create_double(env, tsg::expShiftSum(s, n, a.num(2), e), &out);
  return out;
}

// expProbs(s: f32, n, lse, P: f32) → Σ P: P[i] = f32(exp(f32(s[i] − lse))), Math.exp-identical (sampling.h)
EXPORT_FN(expProbs) {
  Args a(env, info, 4);
  int64_t sl, pl;
  const float* s = a.f32(0, &sl);
  const int64_t n = a.i64(1);
  float* p = a.f32(3, &pl);
  if (n < 0 || sl < n || pl < n) throw Failure{"tsglang_native: expProbs buffers too small"};
  napi_value out;
  napi_create_double(env, tsg::expProbs(s, n, a.num(2), p), &out);
  return out;
}

// fusedSampleRows(backend, logits: f32, V, rows: i32, params: f64 [m·8], tokOut: i32, lpOut: f64, statusOut: i32):
// every sampling mode for m rows on the pool (fused_sampling.h; params per row: invT, topK, topP, minP, u, wantLp,
// topN, 0)
EXPORT_FN(fusedSampleRows) {
  Args a(env, info, 8);
  int64_t ll, rl, pl, tl, lpl, sl;
  float* logits = a.f32(1, &ll);
  const int64_t V = a.i64(2);
  const int32_t* rows = a.i32(3, &rl);
  const double* params = a.f64(4, &pl);
  int32_t* tok = a.i32(5, &tl);
  double* lp = a.f64(6, &lpl);
  int32_t* status = a.i32(7, &sl);
  if (V <= 0 || pl < rl * 8 || tl < rl || lpl < rl || sl < rl) throw Failure{"tsglang_native: fusedSampleRows buffers too small"};
  for (int64_t j = 0; j < rl; j++)
    if (rows[j] < 0 || (static_cast<int64_t>(rows[j]) + 1) * V > ll) throw Failure{"tsglang_native: fusedSampleRows row out of range"};
  static_assert(sizeof(tsg::FusedRowParams) == 8 * sizeof(double), "FusedRowParams is 8 doubles");
  tsg::fusedSampleRows(a.external<Backend>(0)->pool, logits, V, rows, rl, reinterpret_cast<const tsg::FusedRowParams*>(params), tok, lp, status);
  return nullptr;
}

// selectAtLeast(E: f64, n, bound, ids: i32) → count of i < n with E[i] ≥ bound, written to ids ascending (sampling.h)
EXPORT_FN(selectAtLeast) {
  Args a(env, info, 4);
  int64_t el, il;
  const double* e = a.f64(0, &el);
  const int64_t n = a.i64(1);
  int32_t* ids = a.i32(3, &il);
  if (n < 0 || el < n || il < n) throw Failure{"tsglang_native: selectAtLeast buffers too small"};
  napi_value out;
  napi_create_int64(env, tsg::selectAtLeast(e, n, a.num(2), ids), &out);
  return out;
}

// allocWeightMemory(bytes) → ArrayBuffer of `bytes` zeroed bytes, 2 MiB aligned, advised for transparent huge pages
// before first touch (MADV_HUGEPAGE), or null when the memory cannot be mapped. Weights streamed at decode cross a
// 4 KiB page every 4 KiB; with 2 MiB pages the TLB misses and page-bounded prefetch stalls mostly disappear
// (1-thread BF16 mat-vec, 65 MB out of cache: 7.0-8.3 GB/s on 4 KiB pages vs 9.3-10.8 GB/s on 2 MiB pages).
// The mapping is released by the ArrayBuffer's finalizer.
EXPORT_FN(allocWeightMemory) {
  Args a(env, info, 1);
  const int64_t bytes = a.i64(0);
  if (bytes <= 0) throw Failure{"tsglang_native: allocWeightMemory needs a positive byte count"};
  size_t len = 0;
  void* p = tsg::mapHugePages(static_cast<size_t>(bytes), &len);
  napi_value out;
  if (p == nullptr) {
    napi_get_null(env, &out);
    return out;
  }
  struct Mapping {
    void* p;
    size_t len;
  };
  auto* m = new Mapping{p, len};
  const napi_status st = napi_create_external_arraybuffer(
      env, p, static_cast<size_t>(bytes),
      [](napi_env, void*, void* hint) {
        auto* mm = static_cast<Mapping*>(hint);
        tsg::unmapHugePages(mm->p, mm->len);
        delete mm;
      },
      m, &out);
  if (st != napi_ok) {
    tsg::unmapHugePages(p, len);
    delete m;
    napi_get_null(env, &out);
  }
  return out;
}

napi_value init(napi_env env, napi_value exports) {
  const napi_property_descriptor props[] = {
      {"fusedSampleRows", nullptr, fusedSampleRows, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"createBackend", nullptr, createBackend, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"buildInfo", nullptr, buildInfo, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"makeWeight", nullptr, makeWeight, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"matmul", nullptr, matmul, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"embedding", nullptr, embedding, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"rmsNorm", nullptr, rmsNorm, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"layerNorm", nullptr, layerNorm, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"softmax", nullptr, softmax, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"elementwise", nullptr, elementwise, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"rope", nullptr, rope, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"topk", nullptr, topk, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"attention", nullptr, attention, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"groupedMatmul", nullptr, groupedMatmul, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"indexerTopK", nullptr, indexerTopK, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"fusedMoe", nullptr, fusedMoe, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"measureFmaPeak", nullptr, measureFmaPeak, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"measureReadBandwidth", nullptr, measureReadBandwidth, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"argmaxF32", nullptr, argmaxF32, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"scaleMaxF32", nullptr, scaleMaxF32, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"expShiftSum", nullptr, expShiftSum, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"expProbs", nullptr, expProbs, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"selectAtLeast", nullptr, selectAtLeast, nullptr, nullptr, nullptr, napi_default, nullptr},
      {"allocWeightMemory", nullptr, allocWeightMemory, nullptr, nullptr, nullptr, napi_default, nullptr},
  };
  napi_define_properties(env, exports, sizeof(props) / sizeof(props[0]), props);
  tsg::registerShmComm(env, exports);
  return exports;
}

}  // namespace

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
