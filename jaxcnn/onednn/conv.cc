// 2-D convolution (NHWC input, HWIO kernel, NHWC output, f32, no dilation, no groups)
// computed by oneDNN, as three XLA FFI handlers for XLA:CPU:
//
//   JaxcnnOnednnConvFwd        (x, w)   -> y
//   JaxcnnOnednnConvBwdData    (dy, w)  -> dx     (shape of dx from the result buffer)
//   JaxcnnOnednnConvBwdWeights (x, dy)  -> dw     (shape of dw from the result buffer)
//
// Attributes (all i64): sh, sw (strides), pt, pb, pl, pr (explicit padding, as lax).
// Shapes come from the buffers. Primitives (and any layout reorders) are built once per
// (kind, shapes, strides, padding, layout mode) and cached; each call only wraps the XLA
// buffers in dnnl::memory objects and executes. The scratchpad is user-managed and
// allocated per call, so concurrent calls from XLA's threads are safe.
//
// Layout mode (JaxcnnOnednnSetLayout): plain (0) asks oneDNN
// for a primitive on the layouts XLA hands us (nhwc / hwio; oneDNN 3.2 answers with
// im2col + its sgemm, "gemm:jit", for both gradients); any (1) lets the primitive pick
// every layout (blocked, such as nChw16c: the direct "jit" kernels) and reorders
// activations and weights to and from it on every call; mixed (3, the default) keeps
// the activations nhwc and lets the primitive pick the weights' layout, as TensorFlow
// asks oneDNN (brgemm and direct kernels on nhwc; only the small weights reordered);
// auto (2) builds all three the first time a shape is seen, times each on dummy data,
// and keeps the fastest. The default is a fixed mode, not auto, so that the same
// program computes the same numbers in every process: auto's choice rests on timings.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

namespace {

enum Kind : int { kFwd = 0, kBwdData = 1, kBwdWeights = 2 };
enum Layout : int { kPlain = 0, kAny = 1, kAuto = 2, kMixed = 3 };
const char* const kLayoutNames[] = {"plain", "any", "auto", "mixed"};

struct Key {
  int kind, layout;
  int64_t n, h, w, c, kh, kw, o, oh, ow, sh, sw, pt, pb, pl, pr;
  auto tie() const {
    return std::tie(kind, layout, n, h, w, c, kh, kw, o, oh, ow, sh, sw, pt, pb, pl,
                    pr);
  }
  bool operator<(const Key& other) const { return tie() < other.tie(); }
};

// One tensor argument: the plain (user) layout, and the primitive's, with reorders
// between them when they differ.
struct Operand {
  memory::desc user, prim;
  bool reorder = false;
  dnnl::reorder to_prim, to_user;  // to_prim for inputs, to_user for the output
};

struct Entry {
  dnnl::primitive prim;
  memory::desc scratch;
  // kFwd: a=src, b=weights, out=dst. kBwdData: a=diff_dst, b=weights, out=diff_src.
  // kBwdWeights: a=src, b=diff_dst, out=diff_weights.
  int arg_a, arg_b, arg_out;
  Operand a, b, out;
  std::string impl;
};

dnnl::engine& Engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

std::mutex cache_mutex;
std::map<Key, std::shared_ptr<Entry>> cache;
Layout layout = kMixed;  // jaxcnn.onednn sets it from JAXCNN_ONEDNN_LAYOUT on load

Operand MakeOperand(const memory::desc& user, const memory::desc& prim, bool input) {
  Operand op;
  op.user = user;
  op.prim = prim;
  op.reorder = !(user == prim);
  if (op.reorder) {
    auto& eng = Engine();
    if (input) {
      op.to_prim = dnnl::reorder(dnnl::reorder::primitive_desc(eng, user, eng, prim));
    } else {
      op.to_user = dnnl::reorder(dnnl::reorder::primitive_desc(eng, prim, eng, user));
    }
  }
  return op;
}

std::shared_ptr<Entry> Build(const Key& k) {
  auto& eng = Engine();
  memory::dims src_dims = {k.n, k.c, k.h, k.w};
  memory::dims wei_dims = {k.o, k.c, k.kh, k.kw};
  memory::dims dst_dims = {k.n, k.o, k.oh, k.ow};
  memory::dims strides = {k.sh, k.sw};
  memory::dims pad_l = {k.pt, k.pl};
  memory::dims pad_r = {k.pb, k.pr};
  memory::desc src_user(src_dims, dt::f32, tag::nhwc);
  memory::desc wei_user(wei_dims, dt::f32, tag::hwio);
  memory::desc dst_user(dst_dims, dt::f32, tag::nhwc);
  const bool act_any = k.layout == kAny, wei_any = k.layout != kPlain;
  memory::desc src_q = act_any ? memory::desc(src_dims, dt::f32, tag::any) : src_user;
  memory::desc wei_q = wei_any ? memory::desc(wei_dims, dt::f32, tag::any) : wei_user;
  memory::desc dst_q = act_any ? memory::desc(dst_dims, dt::f32, tag::any) : dst_user;

  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // The backward primitives need a forward primitive descriptor as a hint.
  auto fwd_pd = dnnl::convolution_forward::primitive_desc(
      eng, dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_q,
      wei_q, dst_q, strides, pad_l, pad_r, attr);

  auto e = std::make_shared<Entry>();
  if (k.kind == kFwd) {
    e->prim = dnnl::convolution_forward(fwd_pd);
    e->scratch = fwd_pd.scratchpad_desc();
    e->impl = fwd_pd.impl_info_str();
    e->arg_a = DNNL_ARG_SRC;
    e->arg_b = DNNL_ARG_WEIGHTS;
    e->arg_out = DNNL_ARG_DST;
    e->a = MakeOperand(src_user, fwd_pd.src_desc(), true);
    e->b = MakeOperand(wei_user, fwd_pd.weights_desc(), true);
    e->out = MakeOperand(dst_user, fwd_pd.dst_desc(), false);
  } else if (k.kind == kBwdData) {
    auto pd = dnnl::convolution_backward_data::primitive_desc(
        eng, dnnl::algorithm::convolution_direct, src_q, wei_q, dst_q, strides, pad_l,
        pad_r, fwd_pd, attr);
    e->prim = dnnl::convolution_backward_data(pd);
    e->scratch = pd.scratchpad_desc();
    e->impl = pd.impl_info_str();
    e->arg_a = DNNL_ARG_DIFF_DST;
    e->arg_b = DNNL_ARG_WEIGHTS;
    e->arg_out = DNNL_ARG_DIFF_SRC;
    e->a = MakeOperand(dst_user, pd.diff_dst_desc(), true);
    e->b = MakeOperand(wei_user, pd.weights_desc(), true);
    e->out = MakeOperand(src_user, pd.diff_src_desc(), false);
  } else {
    auto pd = dnnl::convolution_backward_weights::primitive_desc(
        eng, dnnl::algorithm::convolution_direct, src_q, wei_q, dst_q, strides, pad_l,
        pad_r, fwd_pd, attr);
    e->prim = dnnl::convolution_backward_weights(pd);
    e->scratch = pd.scratchpad_desc();
    e->impl = pd.impl_info_str();
    e->arg_a = DNNL_ARG_SRC;
    e->arg_b = DNNL_ARG_DIFF_DST;
    e->arg_out = DNNL_ARG_DIFF_WEIGHTS;
    e->a = MakeOperand(src_user, pd.src_desc(), true);
    e->b = MakeOperand(dst_user, pd.diff_dst_desc(), true);
    e->out = MakeOperand(wei_user, pd.diff_weights_desc(), false);
  }
  return e;
}

// Scratch memory owned for the duration of one call.
struct Buffers {
  std::vector<std::unique_ptr<char[]>> owned;
  memory Make(const memory::desc& md) {
    size_t size = md.get_size();
    owned.emplace_back(new char[size + 64]);
    auto addr = reinterpret_cast<uintptr_t>(owned.back().get());
    addr = (addr + 63) & ~uintptr_t{63};
    return memory(md, Engine(), reinterpret_cast<void*>(addr));
  }
};

// Runs one cached primitive on XLA's buffers, reordering to and from the primitive's
// layouts where they differ from nhwc / hwio.
void Execute(const Entry& e, void* a_ptr, void* b_ptr, void* out_ptr) {
  thread_local dnnl::stream stream(Engine());
  Buffers bufs;
  memory a_user(e.a.user, Engine(), a_ptr);
  memory b_user(e.b.user, Engine(), b_ptr);
  memory out_user(e.out.user, Engine(), out_ptr);
  memory a = a_user, b = b_user, o = out_user;
  if (e.a.reorder) {
    a = bufs.Make(e.a.prim);
    e.a.to_prim.execute(stream, a_user, a);
  }
  if (e.b.reorder) {
    b = bufs.Make(e.b.prim);
    e.b.to_prim.execute(stream, b_user, b);
  }
  if (e.out.reorder) o = bufs.Make(e.out.prim);
  std::unordered_map<int, memory> args = {{e.arg_a, a}, {e.arg_b, b}, {e.arg_out, o}};
  if (e.scratch.get_size() > 0) args.emplace(DNNL_ARG_SCRATCHPAD, bufs.Make(e.scratch));
  e.prim.execute(stream, args);
  if (e.out.reorder) e.out.to_user.execute(stream, o, out_user);
  stream.wait();
}

// Median-of-3 seconds of one entry on dummy buffers (after one warm-up run).
double TimeEntry(const Entry& e) {
  std::vector<float> a(e.a.user.get_size() / 4, 0.01f), b(e.b.user.get_size() / 4, 0.01f),
      out(e.out.user.get_size() / 4);
  Execute(e, a.data(), b.data(), out.data());
  std::vector<double> times;
  for (int i = 0; i < 3; ++i) {
    auto start = std::chrono::steady_clock::now();
    Execute(e, a.data(), b.data(), out.data());
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                        .count());
  }
  std::sort(times.begin(), times.end());
  return times[1];
}

// Layout mode auto: build the primitive in each of the other modes (with its reorders),
// time each once, keep the fastest.
std::shared_ptr<Entry> BuildAuto(Key k) {
  std::shared_ptr<Entry> best;
  int best_mode = kPlain;
  double best_t = 0;
  std::ostringstream times;
  for (int mode : {kPlain, kAny, kMixed}) {
    k.layout = mode;
    auto e = Build(k);
    double t = TimeEntry(*e);
    times << " " << kLayoutNames[mode] << " " << t * 1e3 << " ms";
    if (!best || t < best_t) best = e, best_t = t, best_mode = mode;
  }
  best->impl += std::string(" (") + kLayoutNames[best_mode] + ", auto:" + times.str() + ")";
  return best;
}

std::shared_ptr<Entry> Lookup(const Key& k) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto it = cache.find(k);
  if (it != cache.end()) return it->second;
  auto e = k.layout == kAuto ? BuildAuto(k) : Build(k);
  cache.emplace(k, e);
  return e;
}

ffi::Error Run(int kind, ffi::Buffer<ffi::F32, 4> in_a, ffi::Buffer<ffi::F32, 4> in_b,
               ffi::Result<ffi::Buffer<ffi::F32, 4>> out, int64_t sh, int64_t sw,
               int64_t pt, int64_t pb, int64_t pl, int64_t pr) {
  auto da = in_a.dimensions(), db = in_b.dimensions(), dout = out->dimensions();
  Key k{};
  k.kind = kind;
  k.layout = layout;
  k.sh = sh, k.sw = sw, k.pt = pt, k.pb = pb, k.pl = pl, k.pr = pr;
  if (kind == kFwd) {  // x (N,H,W,C), w (KH,KW,C,O) -> y (N,OH,OW,O)
    k.n = da[0], k.h = da[1], k.w = da[2], k.c = da[3];
    k.kh = db[0], k.kw = db[1], k.o = db[3];
    k.oh = dout[1], k.ow = dout[2];
    if (db[2] != k.c) return ffi::Error::InvalidArgument("kernel/input channels differ");
  } else if (kind == kBwdData) {  // dy (N,OH,OW,O), w (KH,KW,C,O) -> dx (N,H,W,C)
    k.n = dout[0], k.h = dout[1], k.w = dout[2], k.c = dout[3];
    k.kh = db[0], k.kw = db[1], k.o = db[3];
    k.oh = da[1], k.ow = da[2];
  } else {  // x (N,H,W,C), dy (N,OH,OW,O) -> dw (KH,KW,C,O)
    k.n = da[0], k.h = da[1], k.w = da[2], k.c = da[3];
    k.kh = dout[0], k.kw = dout[1], k.o = dout[3];
    k.oh = db[1], k.ow = db[2];
  }
  std::shared_ptr<Entry> e;
  try {
    e = Lookup(k);
  } catch (const dnnl::error& err) {
    std::ostringstream msg;
    msg << "oneDNN could not build the convolution primitive: " << err.what();
    return ffi::Error::Internal(msg.str());
  }

  try {
    Execute(*e, in_a.untyped_data(), in_b.untyped_data(), out->untyped_data());
  } catch (const dnnl::error& err) {
    return ffi::Error::Internal(std::string("oneDNN execution failed: ") + err.what());
  }
  return ffi::Error::Success();
}

#define JAXCNN_BIND                         \
  ffi::Ffi::Bind()                          \
      .Arg<ffi::Buffer<ffi::F32, 4>>()      \
      .Arg<ffi::Buffer<ffi::F32, 4>>()      \
      .Ret<ffi::Buffer<ffi::F32, 4>>()      \
      .Attr<int64_t>("sh")                  \
      .Attr<int64_t>("sw")                  \
      .Attr<int64_t>("pt")                  \
      .Attr<int64_t>("pb")                  \
      .Attr<int64_t>("pl")                  \
      .Attr<int64_t>("pr")

ffi::Error Fwd(ffi::Buffer<ffi::F32, 4> a, ffi::Buffer<ffi::F32, 4> b,
               ffi::Result<ffi::Buffer<ffi::F32, 4>> out, int64_t sh, int64_t sw, int64_t pt,
               int64_t pb, int64_t pl, int64_t pr) {
  return Run(kFwd, a, b, out, sh, sw, pt, pb, pl, pr);
}
ffi::Error BwdData(ffi::Buffer<ffi::F32, 4> a, ffi::Buffer<ffi::F32, 4> b,
                   ffi::Result<ffi::Buffer<ffi::F32, 4>> out, int64_t sh, int64_t sw,
                   int64_t pt, int64_t pb, int64_t pl, int64_t pr) {
  return Run(kBwdData, a, b, out, sh, sw, pt, pb, pl, pr);
}
ffi::Error BwdWeights(ffi::Buffer<ffi::F32, 4> a, ffi::Buffer<ffi::F32, 4> b,
                      ffi::Result<ffi::Buffer<ffi::F32, 4>> out, int64_t sh, int64_t sw,
                      int64_t pt, int64_t pb, int64_t pl, int64_t pr) {
  return Run(kBwdWeights, a, b, out, sh, sw, pt, pb, pl, pr);
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxcnnOnednnConvFwd, Fwd, JAXCNN_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxcnnOnednnConvBwdData, BwdData, JAXCNN_BIND);
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxcnnOnednnConvBwdWeights, BwdWeights, JAXCNN_BIND);

// Helpers for Python (ctypes), not FFI handlers.
extern "C" void JaxcnnOnednnSetLayout(int mode) { layout = static_cast<Layout>(mode); }

// One line per cached primitive: kind, shapes, the implementation oneDNN chose, and
// whether operands are reordered. The string lives until the next call.
extern "C" const char* JaxcnnOnednnDescribe() {
  static std::string text;
  std::ostringstream out;
  std::lock_guard<std::mutex> lock(cache_mutex);
  static const char* names[] = {"fwd", "bwd_data", "bwd_weights"};
  for (const auto& [k, e] : cache) {
    out << names[k.kind] << " x=" << k.n << "x" << k.h << "x" << k.w << "x" << k.c
        << " w=" << k.kh << "x" << k.kw << "x" << k.c << "x" << k.o << " s=" << k.sh << ","
        << k.sw << " p=" << k.pt << "," << k.pb << "," << k.pl << "," << k.pr
        << " " << kLayoutNames[k.layout] << " impl=" << e->impl
        << " reorders=" << e->a.reorder << e->b.reorder << e->out.reorder << "\n";
  }
  text = out.str();
  return text.c_str();
}
