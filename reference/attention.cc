#include "reference/attention.h"

#include <algorithm>
#include <cmath>

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::ref {

namespace {

// The inputs as f64 with their sizes: q [b, s, hq, d]; k [b, s, hk, d];
// v [b, s, hk, dv]; dout [b, s, hq, dv].
struct Attention {
  int64_t b = 0, s = 0, hq = 0, hk = 0, d = 0, dv = 0;
  double scale = 1;  // 1/sqrt(d)
  bool causal = false;
  Window window;  // keys at most left before the query and right after it; -1: unbounded
  Tensor q, k, v;

  // Row i of head h in batch bi; k and v rows are those of the kv head h reads.
  const double* q_row(int64_t bi, int64_t i, int64_t h) const { return q.data<double>() + ((bi * s + i) * hq + h) * d; }
  const double* k_row(int64_t bi, int64_t j, int64_t h) const {
    return k.data<double>() + ((bi * s + j) * hk + kv(h)) * d;
  }
  const double* v_row(int64_t bi, int64_t j, int64_t h) const {
    return v.data<double>() + ((bi * s + j) * hk + kv(h)) * dv;
  }
  int64_t kv(int64_t h) const { return h / (hq / hk); }  // the kv head query head h reads
  // Query i sees keys [first_key(i), last_key(i)).
  int64_t first_key(int64_t i) const { return window.left >= 0 ? std::max<int64_t>(0, i - window.left) : 0; }
  int64_t last_key(int64_t i) const {
    if (causal) return i + 1;
    return window.right >= 0 ? std::min(s, i + window.right + 1) : s;
  }
};

Tensor f64(const Tensor& t, const char* name) {
  if (!t.defined() || !t.is_host()) throw RuntimeError(cat("reference attention: ", name, " must be a host tensor"));
  return t.to(DType::f64);
}

Attention load(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, Window window) {
  if (q.ndim() != 4 || k.ndim() != 4 || v.ndim() != 4 || k.dim(0) != q.dim(0) || k.dim(1) != q.dim(1) ||
      k.dim(3) != q.dim(3) || q.dim(2) % k.dim(2) != 0 || v.dim(0) != k.dim(0) || v.dim(1) != k.dim(1) ||
      v.dim(2) != k.dim(2))
    throw RuntimeError(cat("reference attention: q ", shape_string(q.shape()), ", k ", shape_string(k.shape()), ", v ",
                           shape_string(v.shape()),
                           " must be [b, s, hq, d], [b, s, hk, d], [b, s, hk, dv] with hk | hq"));
  Attention a;
  a.b = q.dim(0), a.s = q.dim(1), a.hq = q.dim(2), a.hk = k.dim(2), a.d = q.dim(3), a.dv = v.dim(3);
  a.scale = 1.0 / std::sqrt(static_cast<double>(a.d));
  a.causal = causal;
  if (window.left < -1 || window.right < -1 || (causal && window.right > 0))
    throw RuntimeError(cat("reference attention: window (", window.left, ", ", window.right,
                           ") needs sides >= 0 or -1, and right 0 or -1 when causal"));
  a.window = window;
  a.q = f64(q, "q"), a.k = f64(k, "k"), a.v = f64(v, "v");
  return a;
}

// dout, which has the shape of the output: [b, s, hq, dv].
const Tensor& dout_of(const Attention& a, const Tensor& dout) {
  if (dout.shape() != Shape{a.b, a.s, a.hq, a.dv})
    throw RuntimeError(cat("reference attention: dout ", shape_string(dout.shape()), " must have the shape of out [",
                           a.b, ", ", a.s, ", ", a.hq, ", ", a.dv, "]"));
  return dout;
}

double dot(const double* x, const double* y, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i] * y[i];
  return sum;
}

// Softmax of query row i of (batch bi, head h) over the keys it sees.
struct SoftmaxRow {
  int64_t j0 = 0;         // the first key it sees
  std::vector<double> p;  // P_ij for j in [j0, j0 + p.size())
  double lse = 0;         // log sum_j exp(S_ij)
};

SoftmaxRow softmax_row(const Attention& a, int64_t bi, int64_t h, int64_t i) {
  const int64_t j0 = a.first_key(i), n = a.last_key(i) - j0;
  std::vector<double> scores(n);
  for (int64_t j = 0; j < n; ++j) scores[j] = a.scale * dot(a.q_row(bi, i, h), a.k_row(bi, j0 + j, h), a.d);
  const double max = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (double x : scores) sum += std::exp(x - max);
  SoftmaxRow row;
  row.j0 = j0;
  row.lse = max + std::log(sum);
  row.p.resize(n);
  for (int64_t j = 0; j < n; ++j) row.p[j] = std::exp(scores[j] - max) / sum;
  return row;
}

// dS_ij = P_ij (dP_ij - sum_l P_il dP_il) with dP_ij = dO_i . V_j.
std::vector<double> score_grads(const Attention& a, const SoftmaxRow& row, const double* dout_i, int64_t bi,
                                int64_t h) {
  const int64_t n = static_cast<int64_t>(row.p.size());
  std::vector<double> dp(n);
  double p_dot_dp = 0;
  for (int64_t j = 0; j < n; ++j) {
    dp[j] = dot(dout_i, a.v_row(bi, row.j0 + j, h), a.dv);
    p_dot_dp += row.p[j] * dp[j];
  }
  std::vector<double> ds(n);
  for (int64_t j = 0; j < n; ++j) ds[j] = row.p[j] * (dp[j] - p_dot_dp);
  return ds;
}

}  // namespace

AttentionResult attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, bool causal, Window window) {
  const Attention a = load(q, k, v, causal, window);
  AttentionResult r{Tensor::zeros({a.b, a.s, a.hq, a.dv}, DType::f64), Tensor::zeros({a.b, a.hq, a.s}, DType::f64)};
  double* out = r.out.data<double>();
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.hq; ++h)
      for (int64_t i = 0; i < a.s; ++i) {
        const SoftmaxRow row = softmax_row(a, bi, h, i);
        double* o = out + ((bi * a.s + i) * a.hq + h) * a.dv;  // O_i = sum_j P_ij V_j
        for (size_t j = 0; j < row.p.size(); ++j)
          for (int64_t x = 0; x < a.dv; ++x) o[x] += row.p[j] * a.v_row(bi, row.j0 + static_cast<int64_t>(j), h)[x];
        r.lse.data<double>()[(bi * a.hq + h) * a.s + i] = row.lse;
      }
  return r;
}

AttentionGradients attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                      bool causal, Window window) {
  const Attention a = load(q, k, v, causal, window);
  const Tensor dO = f64(dout_of(a, dout), "dout");
  AttentionGradients g{Tensor::zeros(q.shape(), DType::f64), Tensor::zeros(k.shape(), DType::f64),
                       Tensor::zeros(v.shape(), DType::f64)};
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.hq; ++h)
      for (int64_t i = 0; i < a.s; ++i) {
        const SoftmaxRow row = softmax_row(a, bi, h, i);
        const double* dout_i = dO.data<double>() + ((bi * a.s + i) * a.hq + h) * a.dv;
        const std::vector<double> ds = score_grads(a, row, dout_i, bi, h);
        double* dq_i = g.dq.data<double>() + ((bi * a.s + i) * a.hq + h) * a.d;
        for (size_t j = 0; j < ds.size(); ++j) {
          const int64_t key = row.j0 + static_cast<int64_t>(j);
          const int64_t kv_row = (bi * a.s + key) * a.hk + a.kv(h);
          const double* k_j = a.k_row(bi, key, h);
          double* dk_j = g.dk.data<double>() + kv_row * a.d;
          double* dv_j = g.dv.data<double>() + kv_row * a.dv;
          for (int64_t x = 0; x < a.d; ++x) {
            dq_i[x] += a.scale * ds[j] * k_j[x];                // dQ = scale dS K
            dk_j[x] += a.scale * ds[j] * a.q_row(bi, i, h)[x];  // dK = scale dS^T Q
          }
          for (int64_t x = 0; x < a.dv; ++x) dv_j[x] += row.p[j] * dout_i[x];  // dV = P^T dO
        }
      }
  return g;
}

AttentionRows attention_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout, bool causal,
                             const std::vector<int64_t>& rows, Window window) {
  const Attention a = load(q, k, v, causal, window);
  const Tensor dO = f64(dout_of(a, dout), "dout");
  const int64_t n = static_cast<int64_t>(rows.size());
  AttentionRows r{Tensor::zeros({a.b, n, a.hq, a.dv}, DType::f64), Tensor::zeros({a.b, a.hq, n}, DType::f64),
                  Tensor::zeros({a.b, n, a.hq, a.d}, DType::f64)};
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.hq; ++h)
      for (int64_t ri = 0; ri < n; ++ri) {
        const int64_t i = rows[ri];
        if (i < 0 || i >= a.s) throw RuntimeError(cat("reference attention: row ", i, " outside [0, ", a.s, ")"));
        const SoftmaxRow row = softmax_row(a, bi, h, i);
        const double* dout_i = dO.data<double>() + ((bi * a.s + i) * a.hq + h) * a.dv;
        const std::vector<double> ds = score_grads(a, row, dout_i, bi, h);
        double* o = r.out.data<double>() + ((bi * n + ri) * a.hq + h) * a.dv;
        double* dq = r.dq.data<double>() + ((bi * n + ri) * a.hq + h) * a.d;
        for (size_t j = 0; j < row.p.size(); ++j) {
          const int64_t key = row.j0 + static_cast<int64_t>(j);
          for (int64_t x = 0; x < a.dv; ++x) o[x] += row.p[j] * a.v_row(bi, key, h)[x];
          for (int64_t x = 0; x < a.d; ++x) dq[x] += a.scale * ds[j] * a.k_row(bi, key, h)[x];
        }
        r.lse.data<double>()[(bi * a.hq + h) * n + ri] = row.lse;
      }
  return r;
}

}  // namespace sextant::ref
