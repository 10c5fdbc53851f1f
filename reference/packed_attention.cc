#include "reference/packed_attention.h"

#include "harness/error.h"
#include "harness/strings.h"

namespace sextant::ref {

namespace {

// [start, start + length) along s of every sequence; checks that they tile
// s. A sequence of no tokens has no rows and no span.
struct Span {
  int64_t start = 0, length = 0;
};
std::vector<Span> spans_of(const std::vector<int64_t>& seq_lens, int64_t s) {
  std::vector<Span> spans;
  int64_t at = 0;
  for (int64_t n : seq_lens) {
    if (n < 0) throw RuntimeError(cat("reference packed attention: sequence length ", n, " must not be negative"));
    if (n == 0) continue;
    spans.push_back({at, n});
    at += n;
  }
  if (at != s)
    throw RuntimeError(cat("reference packed attention: sequence lengths sum to ", at, ", not the ", s, " rows"));
  return spans;
}

Tensor rows_of(const Tensor& t, const Span& span) { return narrow(t, 1, span.start, span.length); }

}  // namespace

AttentionResult packed_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const std::vector<int64_t>& seq_lens, int64_t window_left) {
  std::vector<Tensor> out, lse;
  for (const Span& span : spans_of(seq_lens, q.dim(1))) {
    AttentionResult r = attention_forward(rows_of(q, span), rows_of(k, span), rows_of(v, span), true, {window_left});
    out.push_back(r.out);
    lse.push_back(r.lse);
  }
  return {concat(out, 1), concat(lse, 2)};
}

AttentionGradients packed_attention_backward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                             const std::vector<int64_t>& seq_lens, int64_t window_left) {
  std::vector<Tensor> dq, dk, dv;
  for (const Span& span : spans_of(seq_lens, q.dim(1))) {
    AttentionGradients g = attention_backward(rows_of(q, span), rows_of(k, span), rows_of(v, span), rows_of(dout, span),
                                              true, {window_left});
    dq.push_back(g.dq);
    dk.push_back(g.dk);
    dv.push_back(g.dv);
  }
  return {concat(dq, 1), concat(dk, 1), concat(dv, 1)};
}

AttentionRows packed_attention_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout,
                                    const std::vector<int64_t>& seq_lens, const std::vector<int64_t>& rows,
                                    int64_t window_left) {
  const std::vector<Span> spans = spans_of(seq_lens, q.dim(1));
  std::vector<Tensor> out, lse, dq;
  for (int64_t row : rows) {
    const Span* span = nullptr;
    for (const Span& s : spans)
      if (row >= s.start && row < s.start + s.length) span = &s;
    if (!span) throw RuntimeError(cat("reference packed attention: row ", row, " outside [0, ", q.dim(1), ")"));
    AttentionRows r = attention_rows(rows_of(q, *span), rows_of(k, *span), rows_of(v, *span), rows_of(dout, *span),
                                     true, {row - span->start}, {window_left});
    out.push_back(r.out);
    lse.push_back(r.lse);
    dq.push_back(r.dq);
  }
  return {concat(out, 1), concat(lse, 2), concat(dq, 1)};
}

}  // namespace sextant::ref
