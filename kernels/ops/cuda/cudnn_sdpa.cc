#include "kernels/ops/cuda/cudnn_sdpa.h"

#include <cuda_runtime_api.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "harness/error.h"
#include "harness/memo.h"
#include "harness/strings.h"
#include "kernels/ops/attention_impl.h"
#include "kernels/ops/cuda/cuda_common.h"

#ifndef SEXTANT_CUDA_LIBRARY_DIR
#define SEXTANT_CUDA_LIBRARY_DIR ""
#endif

// cudnn-frontend's dynamic loading reads every cuDNN symbol through this handle.
namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;
}

namespace sextant::ops::cuda::cudnn {

namespace fe = cudnn_frontend;

namespace {

// Tensor ids of the variant pack.
enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDout, kDq, kDk, kDv };

void check(fe::error_t status, const char* step, const SdpaShape& s) {
  if (status.is_bad())
    throw RuntimeError(cat("cuDNN attention (b ", s.b, ", heads ", s.hq, "/", s.hk, ", ", s.sq, " x ", s.sk,
                           " rows, d ", s.d, s.causal ? ", causal" : "", "): ", step,
                           " failed: ", status.get_message()));
}

fe::DataType_t storage_type(DType dtype) {
  return dtype == DType::f16 ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
}

std::shared_ptr<fe::graph::Graph> new_graph(const SdpaShape& s, int sm_version) {
  load_library();  // the frontend's checks ask the library for its version
  if (!supports(s.dtype, s.d) || !supports(s.dtype, s.dv))
    throw RuntimeError(cat("cuDNN attention takes bf16 or f16 with head_dim a multiple of 8 up to 128, not ",
                           dtype_name(s.dtype), " with head_dim ", s.d, s.dv != s.d ? cat(" (v: ", s.dv, ")") : ""));
  if (s.causal && s.sq != s.sk) throw RuntimeError("cuDNN attention: a causal piece must be square");
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_io_data_type(storage_type(s.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  if (sm_version > 0) graph->set_sm_version(sm_version);
  return graph;
}

// A contiguous BSHD tensor seen as cuDNN's [b, h, s, d].
std::shared_ptr<fe::graph::Tensor_attributes> bshd(fe::graph::Graph& g, const char* name, int64_t uid, int64_t b,
                                                   int64_t heads, int64_t rows, int64_t d) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({b, heads, rows, d})
                      .set_stride({rows * heads * d, d, heads * d, 1}));
}

void set_bshd_output(fe::graph::Tensor_attributes& t, int64_t uid, int64_t b, int64_t heads, int64_t rows, int64_t d) {
  t.set_output(true).set_uid(uid).set_dim({b, heads, rows, d}).set_stride({rows * heads * d, d, heads * d, 1});
}

// A graph lowered to its execution plan (heuristics' first choice that
// builds), with the workspace it needs; no graph: cuDNN does not take the
// shape, for the reason given.
struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace = 0;
  std::string refused;
};

cudnnHandle_t handle() {
  thread_local cudnnHandle_t h = [] {
    load_library();
    cudnnHandle_t created = nullptr;
    if (fe::detail::create_handle(&created) != CUDNN_STATUS_SUCCESS)
      throw RuntimeError("cuDNN: cudnnCreate failed (is a GPU visible?)");
    if (fe::detail::set_stream(created, compute_stream()) != CUDNN_STATUS_SUCCESS)
      throw RuntimeError("cuDNN: cudnnSetStream failed");
    return created;
  }();
  return h;
}

Plan lower(const SdpaShape& s, bool backward) {
  cudnnHandle_t h = handle();  // outside the try: a missing library is an error, not a refusal
  Plan plan;
  try {
    plan.graph = backward ? backward_graph(s) : forward_graph(s);
    check(plan.graph->build_operation_graph(h), "build_operation_graph", s);
    check(plan.graph->create_execution_plans({fe::HeurMode_t::A}), "create_execution_plans", s);
    check(plan.graph->check_support(h), "check_support", s);
    check(plan.graph->build_plans(h), "build_plans", s);
    check(plan.graph->get_workspace_size(plan.workspace), "get_workspace_size", s);
  } catch (const RuntimeError& e) {
    plan.graph.reset();
    plan.refused = e.what();
  }
  return plan;
}

// One plan per shape and direction: building one takes milliseconds, a
// sweep runs the same few shapes many times.
struct PlanKey {
  SdpaShape shape;
  bool backward = false;
  int device = 0;
  bool operator==(const PlanKey&) const = default;
};

const Plan& plan_for(const SdpaShape& s, bool backward) {
  thread_local Memo<PlanKey, Plan> plans(256);
  int device = 0;
  SEXTANT_CHECK_CUDA(cudaGetDevice(&device));
  return plans.get(PlanKey{s, backward, device}, [&] {
    Plan plan = lower(s, backward);
    if (!plan.graph)
      std::fprintf(stderr, "sextant: our attention kernels run this %s piece: %s\n", backward ? "backward" : "forward",
                   plan.refused.c_str());
    return plan;
  });
}

// This thread's workspace, grown to the largest a plan has asked for and
// kept (an allocation per call would synchronize the device).
void* workspace(int64_t bytes) {
  thread_local void* buffer = nullptr;
  thread_local int64_t size = 0;
  if (bytes > size) {
    if (buffer) SEXTANT_CHECK_CUDA(cudaFree(buffer));
    buffer = nullptr, size = 0;
    SEXTANT_CHECK_CUDA(cudaMalloc(&buffer, static_cast<size_t>(bytes)));
    size = bytes;
  }
  return buffer;
}

void execute(const Plan& plan, std::unordered_map<int64_t, void*>& pack, const SdpaShape& s) {
  if (!plan.graph) throw RuntimeError(cat("cuDNN attention: no plan for this shape: ", plan.refused));
  check(plan.graph->execute(handle(), pack, plan.workspace > 0 ? workspace(plan.workspace) : nullptr), "execute", s);
}

}  // namespace

bool supports(DType dtype, int64_t head_dim) { return fused_attention_supports(dtype, head_dim); }

std::shared_ptr<fe::graph::Graph> forward_graph(const SdpaShape& s, int sm_version) {
  auto g = new_graph(s, sm_version);
  auto q = bshd(*g, "Q", kQ, s.b, s.hq, s.sq, s.d);
  auto k = bshd(*g, "K", kK, s.b, s.hk, s.sk, s.d);
  auto v = bshd(*g, "V", kV, s.b, s.hk, s.sk, s.dv);
  auto options = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(s.scale);
  if (s.causal) options.set_causal_mask(true);
  auto [o, stats] = g->sdpa(q, k, v, options);
  set_bshd_output(*o, kO, s.b, s.hq, s.sq, s.dv);
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({s.b, s.hq, s.sq, 1})
      .set_stride({s.hq * s.sq, s.sq, 1, 1});
  check(g->validate(), "validate", s);
  return g;
}

std::shared_ptr<fe::graph::Graph> backward_graph(const SdpaShape& s, int sm_version) {
  auto g = new_graph(s, sm_version);
  auto q = bshd(*g, "Q", kQ, s.b, s.hq, s.sq, s.d);
  auto k = bshd(*g, "K", kK, s.b, s.hk, s.sk, s.d);
  auto v = bshd(*g, "V", kV, s.b, s.hk, s.sk, s.dv);
  auto o = bshd(*g, "O", kO, s.b, s.hq, s.sq, s.dv);
  auto dout = bshd(*g, "dO", kDout, s.b, s.hq, s.sq, s.dv);
  // Packed (cuDNN before 9.26 takes no other layout for the backward's stats).
  auto lse = g->tensor(fe::graph::Tensor_attributes()
                           .set_name("Stats")
                           .set_uid(kStats)
                           .set_data_type(fe::DataType_t::FLOAT)
                           .set_dim({s.b, s.hq, s.sq, 1})
                           .set_stride({s.hq * s.sq, s.sq, 1, 1}));
  auto options = fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(s.scale);
  if (s.causal) options.set_causal_mask(true);
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dout, lse, options);
  set_bshd_output(*dq, kDq, s.b, s.hq, s.sq, s.d);
  set_bshd_output(*dk, kDk, s.b, s.hk, s.sk, s.d);
  set_bshd_output(*dv, kDv, s.b, s.hk, s.sk, s.dv);
  check(g->validate(), "validate", s);
  return g;
}

std::vector<std::string> library_candidates() {
  if (const char* env = std::getenv("SEXTANT_CUDNN_LIBRARY")) return {env};
  std::vector<std::string> paths = {"libcudnn.so.9"};
  if (*SEXTANT_CUDA_LIBRARY_DIR) paths.push_back(std::string(SEXTANT_CUDA_LIBRARY_DIR) + "/libcudnn.so.9");
  return paths;
}

void* open_library(const std::vector<std::string>& candidates, std::string* where) {
  for (const std::string& path : candidates)
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      if (where) *where = path;
      return handle;
    }
  throw RuntimeError(cat("attention_impl=cudnn: cannot load cuDNN 9 (tried ", join(candidates, ", "),
                         "); set SEXTANT_CUDNN_LIBRARY to libcudnn.so.9 (pip: site-packages/nvidia/cudnn/lib) or "
                         "use --set attention_impl=own"));
}

std::string load_library() {
  static std::once_flag once;
  static std::string where, failure;
  std::call_once(once, [] {
    // The frontend opens the CUDA runtime for a few calls: the one this
    // binary runs on, not another major version a wheel may have on the path.
    setenv("CUDNN_FRONTEND_CUDART_LIB_NAME", cat("libcudart.so.", CUDART_VERSION / 1000).c_str(), 0);
    try {
      fe::cudnn_dlhandle = open_library(library_candidates(), &where);
    } catch (const RuntimeError& e) {
      failure = e.what();
    }
  });
  if (!failure.empty()) throw RuntimeError(failure);
  return where;
}

bool takes(const SdpaShape& s, bool backward) { return plan_for(s, backward).graph != nullptr; }

int64_t library_version() {
  load_library();
  return static_cast<int64_t>(fe::detail::get_backend_version());
}

void run_forward(const SdpaShape& s, const ForwardPointers& p) {
  const Plan& plan = plan_for(s, false);
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(p.q)},
                                             {kK, const_cast<void*>(p.k)},
                                             {kV, const_cast<void*>(p.v)},
                                             {kO, p.o},
                                             {kStats, p.stats}};
  execute(plan, pack, s);
}

void run_backward(const SdpaShape& s, const BackwardPointers& p) {
  const Plan& plan = plan_for(s, true);
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(p.q)},
                                             {kK, const_cast<void*>(p.k)},
                                             {kV, const_cast<void*>(p.v)},
                                             {kO, const_cast<void*>(p.o)},
                                             {kDout, const_cast<void*>(p.dout)},
                                             {kStats, const_cast<float*>(p.lse)},
                                             {kDq, p.dq},
                                             {kDk, p.dk},
                                             {kDv, p.dv}};
  execute(plan, pack, s);
}

}  // namespace sextant::ops::cuda::cudnn
