#include "kernels/attention/packing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "harness/error.h"
#include "harness/rng.h"
#include "harness/strings.h"
#include "kernels/ops/attention_block.h"

namespace sextant::cp {

namespace {

std::vector<int64_t> prefix_sums(const std::vector<int64_t>& v) {
  std::vector<int64_t> out = {0};
  for (int64_t x : v) out.push_back(out.back() + x);
  return out;
}

// A whole decimal integer, or nullopt.
std::optional<int64_t> parse_integer(const std::string& text) {
  try {
    size_t used = 0;
    const int64_t n = std::stoll(text, &used);
    if (used == text.size()) return n;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace

int64_t Packing::tokens() const { return std::accumulate(lengths.begin(), lengths.end(), int64_t{0}); }
int64_t Packing::rows() const { return std::accumulate(padded.begin(), padded.end(), int64_t{0}); }
std::vector<int64_t> Packing::cu_seqlens() const { return prefix_sums(lengths); }
std::vector<int64_t> Packing::cu_seqlens_padded() const { return prefix_sums(padded); }

Packing pack_sequences(std::vector<int64_t> lengths, int64_t multiple, int64_t tail) {
  if (multiple < 1) throw RuntimeError(cat("pack_sequences: multiple ", multiple, " must be positive"));
  if (tail < 0) throw RuntimeError(cat("pack_sequences: tail padding ", tail, " must not be negative"));
  Packing p;
  for (int64_t n : lengths) {
    if (n < 0) throw RuntimeError(cat("pack_sequences: sequence length ", n, " must not be negative"));
    p.padded.push_back((n + multiple - 1) / multiple * multiple);
  }
  p.lengths = std::move(lengths);
  if (tail > 0) {
    p.lengths.push_back(0);
    p.padded.push_back((tail + multiple - 1) / multiple * multiple);
  }
  return p;
}

std::vector<int64_t> sequence_of_rows(const Packing& packing, const std::vector<int64_t>& rows) {
  const std::vector<int64_t> starts = packing.cu_seqlens_padded();
  std::vector<int64_t> names;
  names.reserve(rows.size());
  for (int64_t row : rows) {
    // The last sequence that starts at or before the row.
    const auto after = std::upper_bound(starts.begin(), starts.end() - 1, row);
    const size_t i = static_cast<size_t>(after - starts.begin()) - 1;
    const bool real = row >= 0 && row < starts.back() && row - starts[i] < packing.lengths[i];
    names.push_back(real ? starts[i] : ops::AttentionMask::kPaddingRow);
  }
  return names;
}

int64_t token_of_row(const Packing& packing, int64_t row) {
  int64_t row0 = 0, token0 = 0;
  for (size_t i = 0; i < packing.lengths.size(); ++i) {
    if (row < row0 + packing.padded[i]) return row - row0 < packing.lengths[i] ? token0 + row - row0 : -1;
    row0 += packing.padded[i];
    token0 += packing.lengths[i];
  }
  return -1;
}

int64_t causal_pairs(const Packing& packing) {
  int64_t pairs = 0;
  for (int64_t n : packing.lengths) pairs += n * (n + 1) / 2;
  return pairs;
}

std::vector<int64_t> zipf_lengths(int64_t n, int64_t total, uint64_t seed) {
  if (n < 1 || n > total) throw RuntimeError(cat("zipf_lengths: ", n, " lengths cannot sum to ", total));
  std::vector<double> weight(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    // u in (0, 1]: Pareto draw u^(-1 / 1.2).
    const uint64_t bits = random_bits(seed, tensor_id("packing.zipf"), static_cast<uint64_t>(i));
    const double u = (static_cast<double>(bits >> 11) + 1.0) / 9007199254740992.0;
    weight[static_cast<size_t>(i)] = std::pow(u, -1.0 / 1.2);
  }
  const double sum = std::accumulate(weight.begin(), weight.end(), 0.0);
  // Every length starts at 1; the other total - n rows go by weight, the
  // remainder of the rounding to the largest fractional parts.
  const int64_t spare = total - n;
  std::vector<int64_t> lengths(static_cast<size_t>(n), 1);
  std::vector<std::pair<double, int64_t>> fraction;
  int64_t given = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double share = static_cast<double>(spare) * weight[static_cast<size_t>(i)] / sum;
    const int64_t whole = static_cast<int64_t>(std::floor(share));
    lengths[static_cast<size_t>(i)] += whole;
    given += whole;
    fraction.emplace_back(share - static_cast<double>(whole), i);
  }
  std::sort(fraction.begin(), fraction.end(),
            [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  for (int64_t k = 0; k < spare - given; ++k) ++lengths[static_cast<size_t>(fraction[static_cast<size_t>(k)].second)];
  return lengths;
}

void require_packed_lengths(const std::string& name, const std::vector<int64_t>& lengths, int64_t seq, int64_t multiple,
                            int64_t tail) {
  for (int64_t n : lengths) require(n >= 0, cat(name, ": length ", n, " must not be negative"));
  require(std::any_of(lengths.begin(), lengths.end(), [](int64_t n) { return n > 0; }),
          cat(name, ": at least one sequence must have a token"));
  if (multiple > 1 || tail > 0) {
    const int64_t rows = pack_sequences(lengths, multiple, tail).rows();
    require(rows == seq, cat(name, ": the lengths padded to multiples of ", multiple, " and ", tail,
                             " rows of tail padding fill ", rows, " rows, not --seq ", seq));
    return;
  }
  const int64_t sum = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  require(sum == seq, cat(name, ": the lengths sum to ", sum, ", not --seq ", seq));
}

std::vector<int64_t> parse_seq_lens(const std::string& spec, int64_t seq, uint64_t seed, int64_t multiple,
                                    int64_t tail) {
  const std::string name = cat("--set seq_lens=", spec);
  if (spec.rfind("zipf:", 0) == 0) {
    require(multiple == 1 && tail == 0,
            cat(name, ": zipf:N draws lengths that fill --seq; with padding give the lengths as a list"));
    const int64_t n = parse_integer(spec.substr(5)).value_or(0);
    require(n >= 1, cat(name, ": zipf:N needs a positive count N"));
    require(n <= seq, cat(name, ": ", n, " sequences of at least one token must fit --seq ", seq));
    return zipf_lengths(n, seq, seed);
  }
  std::vector<int64_t> lengths;
  for (const std::string& part : split(spec, ',')) {
    const std::optional<int64_t> n = parse_integer(part);
    require(n.has_value(), cat(name, " must be a comma-separated list of lengths or zipf:N"));
    lengths.push_back(*n);
  }
  require(!lengths.empty(), cat(name, " must be a comma-separated list of lengths or zipf:N"));
  require_packed_lengths(name, lengths, seq, multiple, tail);
  return lengths;
}

}  // namespace sextant::cp
