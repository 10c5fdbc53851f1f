#include "reference/moe.h"

#include <algorithm>
#include <cmath>

#include "harness/error.h"
#include "harness/strings.h"
#include "reference/f64_tensor.h"
#include "reference/gelu.h"

namespace sextant::ref {

namespace {

struct Dims {
  int64_t t, h, e, f;
};

Dims dims_of(const Tensor& x, const MoeParams& p, const MoeConfig& c) {
  const Dims d{x.dim(0), x.dim(1), c.experts, p.w1.dim(2)};
  expect_shape("ref::moe", "router", p.router, {d.h, d.e});
  expect_shape("ref::moe", "w1", p.w1, {d.e, d.h, d.f});
  expect_shape("ref::moe", "w2", p.w2, {d.e, d.f, d.h});
  return d;
}

std::vector<double> softmax(const double* l, int64_t n) {
  const double m = *std::max_element(l, l + n);
  std::vector<double> s(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += s[i] = std::exp(l[i] - m);
  for (double& v : s) v /= sum;
  return s;
}

double logsumexp(const double* l, int64_t n) {
  const double m = *std::max_element(l, l + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(l[i] - m);
  return m + std::log(sum);
}

// Expert e on one token: a = W1_e^T x, g = gelu(a), o = W2_e^T g.
struct ExpertPass {
  std::vector<double> a, g, o;
};
ExpertPass expert(const double* x, const double* w1, const double* w2, const Dims& d, int e) {
  ExpertPass p{std::vector<double>(d.f, 0.0), std::vector<double>(d.f), std::vector<double>(d.h, 0.0)};
  const double *W1 = w1 + e * d.h * d.f, *W2 = w2 + e * d.f * d.h;
  for (int64_t i = 0; i < d.h; ++i)
    for (int64_t j = 0; j < d.f; ++j) p.a[j] += x[i] * W1[i * d.f + j];
  for (int64_t j = 0; j < d.f; ++j) p.g[j] = gelu(p.a[j]);
  for (int64_t j = 0; j < d.f; ++j)
    for (int64_t i = 0; i < d.h; ++i) p.o[i] += p.g[j] * W2[j * d.h + i];
  return p;
}

// f_i: slots routed to expert i before dropping, over T k.
std::vector<double> routed_fraction(const MoeRouting& r, int experts) {
  std::vector<double> f(static_cast<size_t>(experts), 0.0);
  for (int e : r.expert) f[e] += 1.0 / static_cast<double>(r.tokens * r.topk);
  return f;
}

}  // namespace

Tensor moe_router_logits(const Tensor& x_in, const Tensor& router_in) {
  const Tensor x = as_f64(x_in), w = as_f64(router_in);
  const int64_t t = x.dim(0), h = x.dim(1), e = w.dim(1);
  expect_shape("ref::moe_router_logits", "router", w, {h, e});
  Tensor l = Tensor::zeros({t, e}, DType::f64);
  for (int64_t i = 0; i < t; ++i)
    for (int64_t k = 0; k < h; ++k)
      for (int64_t j = 0; j < e; ++j)
        l.data<double>()[i * e + j] += x.data<double>()[i * h + k] * w.data<double>()[k * e + j];
  return l;
}

namespace {

// Whether `other` (k expert ids) is a top k of the e logits l to within
// band x max|l| while `order` (all experts, by descending logit) starts with
// another set; then order's first k become other's, by descending logit.
bool follows_within_band(const double* l, int e, int k, const int* other, double band, std::vector<int>& order) {
  std::vector<int> chosen(other, other + k), own(order.begin(), order.begin() + k);
  std::sort(chosen.begin(), chosen.end());
  std::sort(own.begin(), own.end());
  if (chosen == own) return false;
  double scale = 0, lowest_chosen = INFINITY, highest_other = -INFINITY;
  for (int j = 0; j < e; ++j) {
    scale = std::max(scale, std::abs(l[j]));
    if (std::binary_search(chosen.begin(), chosen.end(), j)) lowest_chosen = std::min(lowest_chosen, l[j]);
    else highest_other = std::max(highest_other, l[j]);
  }
  if (lowest_chosen < highest_other - band * scale) return false;
  std::stable_partition(order.begin(), order.end(),
                        [&](int j) { return std::binary_search(chosen.begin(), chosen.end(), j); });
  std::stable_sort(order.begin(), order.begin() + k, [&](int a, int b) { return l[a] > l[b]; });
  return true;
}

}  // namespace

MoeRouting moe_route(const Tensor& logits, const MoeConfig& c) {
  const int64_t t = logits.dim(0), e = logits.dim(1);
  const int k = c.topk;
  if (c.follow && static_cast<int64_t>(c.follow->size()) != t * k)
    throw RuntimeError(
        cat("ref::moe_route: the routing to follow has ", c.follow->size(), " slots, not ", t, " x ", k));
  MoeRouting r{t,
               k,
               std::vector<int>(t * k),
               std::vector<double>(t * k),
               std::vector<char>(t * k, 1),
               std::vector<int64_t>(e, 0),
               0};
  for (int64_t i = 0; i < t; ++i) {
    const double* l = logits.data<double>() + i * e;
    std::vector<int> order(static_cast<size_t>(e));
    for (int j = 0; j < e; ++j) order[j] = j;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    if (c.follow && follows_within_band(l, e, k, c.follow->data() + i * k, c.tie_band, order)) ++r.followed;
    const std::vector<double> s = softmax(l, e);
    double sum = 0;
    for (int j = 0; j < k; ++j) sum += std::exp(l[order[j]] - l[order[0]]);
    for (int j = 0; j < k; ++j) {
      r.expert[i * k + j] = order[j];
      r.prob[i * k + j] = c.pre_softmax ? s[order[j]] : std::exp(l[order[j]] - l[order[0]]) / sum;
    }
  }
  if (c.drop != MoeDrop::none) {
    const int64_t group = c.capacity_group > 0 ? c.capacity_group : t;
    for (int64_t g0 = 0; g0 < t; g0 += group) {
      const int64_t g1 = std::min(t, g0 + group);
      const auto capacity =
          static_cast<int64_t>(std::ceil(static_cast<double>(g1 - g0) * k / c.experts * c.capacity_factor));
      for (int x = 0; x < e; ++x) {
        std::vector<int64_t> slots;  // in token order
        for (int64_t s = g0 * k; s < g1 * k; ++s)
          if (r.expert[s] == x) slots.push_back(s);
        if (c.drop == MoeDrop::probability)
          std::stable_sort(slots.begin(), slots.end(), [&](int64_t a, int64_t b) { return r.prob[a] > r.prob[b]; });
        for (size_t i = static_cast<size_t>(std::max<int64_t>(capacity, 0)); i < slots.size(); ++i) {
          r.kept[slots[i]] = 0;
          ++r.dropped;
        }
      }
    }
  }
  for (int64_t s = 0; s < t * k; ++s)
    if (r.kept[s]) ++r.load[r.expert[s]];
  return r;
}

MoeResult moe_forward(const Tensor& x_in, const MoeParams& p, const MoeConfig& c) {
  const Tensor x = as_f64(x_in), w1 = as_f64(p.w1), w2 = as_f64(p.w2);
  const Dims d = dims_of(x, p, c);
  MoeResult out;
  out.logits = moe_router_logits(x, p.router);
  out.routing = moe_route(out.logits, c);
  out.y = Tensor::zeros({d.t, d.h}, DType::f64);
  const MoeRouting& r = out.routing;
  const std::vector<double> f = routed_fraction(r, c.experts);
  std::vector<double> mean_score(static_cast<size_t>(d.e), 0.0);
  double z = 0;
  for (int64_t t = 0; t < d.t; ++t) {
    const double* l = out.logits.data<double>() + t * d.e;
    const std::vector<double> s = softmax(l, d.e);
    for (int64_t i = 0; i < d.e; ++i) mean_score[i] += s[i] / static_cast<double>(d.t);
    z += std::pow(logsumexp(l, d.e), 2) / static_cast<double>(d.t);
    for (int j = 0; j < c.topk; ++j) {
      const int64_t slot = t * c.topk + j;
      if (!r.kept[slot]) continue;
      const ExpertPass e = expert(x.data<double>() + t * d.h, w1.data<double>(), w2.data<double>(), d, r.expert[slot]);
      for (int64_t i = 0; i < d.h; ++i) out.y.data<double>()[t * d.h + i] += r.prob[slot] * e.o[i];
    }
  }
  for (int64_t i = 0; i < d.e; ++i) out.aux_loss += c.aux_coeff * d.e * f[i] * mean_score[i];
  out.z_loss = c.z_coeff * z;
  return out;
}

MoeGradients moe_backward(const Tensor& dy_in, const Tensor& x_in, const MoeParams& p, const MoeConfig& c) {
  const Tensor x = as_f64(x_in), dy = as_f64(dy_in), wr = as_f64(p.router), w1 = as_f64(p.w1), w2 = as_f64(p.w2);
  const Dims d = dims_of(x, p, c);
  expect_shape("ref::moe_backward", "dy", dy, {d.t, d.h});
  const Tensor logits = moe_router_logits(x, wr);
  const MoeRouting r = moe_route(logits, c);
  const std::vector<double> f = routed_fraction(r, c.experts);
  MoeGradients g{Tensor::zeros({d.t, d.h}, DType::f64), Tensor::zeros({d.h, d.e}, DType::f64),
                 Tensor::zeros(p.w1.shape(), DType::f64), Tensor::zeros(p.w2.shape(), DType::f64)};
  double *dx = g.dx.data<double>(), *dwr = g.drouter.data<double>(), *dw1 = g.dw1.data<double>(),
         *dw2 = g.dw2.data<double>();
  const double *X = x.data<double>(), *DY = dy.data<double>(), *WR = wr.data<double>(), *W1 = w1.data<double>(),
               *W2 = w2.data<double>();
  const double total = static_cast<double>(d.t);
  for (int64_t t = 0; t < d.t; ++t) {
    const double *xt = X + t * d.h, *dyt = DY + t * d.h;
    std::vector<double> dprob(static_cast<size_t>(c.topk), 0.0);
    // Experts: y_t += p o  =>  dp = <dy, o>, do = p dy, then back through W2, gelu, W1.
    for (int j = 0; j < c.topk; ++j) {
      const int64_t slot = t * c.topk + j;
      if (!r.kept[slot]) continue;
      const int e = r.expert[slot];
      const ExpertPass ex = expert(xt, W1, W2, d, e);
      std::vector<double> dg(static_cast<size_t>(d.f), 0.0);
      for (int64_t i = 0; i < d.h; ++i) {
        dprob[j] += dyt[i] * ex.o[i];
        const double dout = r.prob[slot] * dyt[i];
        for (int64_t k = 0; k < d.f; ++k) {
          dw2[(e * d.f + k) * d.h + i] += ex.g[k] * dout;
          dg[k] += W2[(e * d.f + k) * d.h + i] * dout;
        }
      }
      for (int64_t k = 0; k < d.f; ++k) {
        const double da = gelu_derivative(ex.a[k]) * dg[k];
        for (int64_t i = 0; i < d.h; ++i) {
          dw1[(e * d.h + i) * d.f + k] += xt[i] * da;
          dx[t * d.h + i] += W1[(e * d.h + i) * d.f + k] * da;
        }
      }
    }
    // Router: through the probabilities, the aux loss (P_i) and the z loss.
    const double* l = logits.data<double>() + t * d.e;
    const std::vector<double> s = softmax(l, d.e);
    std::vector<double> ds(static_cast<size_t>(d.e)), dl(static_cast<size_t>(d.e), 0.0);
    for (int64_t i = 0; i < d.e; ++i) ds[i] = c.aux_coeff * d.e * f[i] / total;
    double pdp = 0;
    for (int j = 0; j < c.topk; ++j) pdp += r.prob[t * c.topk + j] * dprob[j];
    for (int j = 0; j < c.topk; ++j) {
      const int e = r.expert[t * c.topk + j];
      if (c.pre_softmax) ds[e] += dprob[j];
      else dl[e] += r.prob[t * c.topk + j] * (dprob[j] - pdp);
    }
    double sds = 0;
    for (int64_t i = 0; i < d.e; ++i) sds += s[i] * ds[i];
    const double lse = logsumexp(l, d.e);
    for (int64_t i = 0; i < d.e; ++i) dl[i] += s[i] * (ds[i] - sds) + c.z_coeff * 2.0 * lse / total * s[i];
    for (int64_t i = 0; i < d.h; ++i)
      for (int64_t e = 0; e < d.e; ++e) {
        dx[t * d.h + i] += WR[i * d.e + e] * dl[e];
        dwr[i * d.e + e] += xt[i] * dl[e];
      }
  }
  return g;
}

}  // namespace sextant::ref
