// Schedule generators. Each returns per-rank action lists plus the
// stage-to-rank placement the schedule assumes. p = ranks, m = microbatches,
// v = chunks (stages) per rank. The sizes are not checked here: the
// schedule's row in schedules.h holds its rules, and make_schedule() checks
// them (UsageError naming the rule) before it calls a generator.
#pragma once

#include <string>
#include <vector>

#include "kernels/pipeline/schedule.h"

namespace sextant::pp {

// GPipe: every forward, then every backward (peak activations m per rank).
Schedule gpipe(int p, int m);

// 1F1B (PipeDream-Flush): rank r runs min(p - r - 1, m) warm-up forwards,
// then alternates one forward and one backward, then drains the backwards.
// Peak activations p - r on rank r.
Schedule one_f_one_b(int p, int m);

// Interleaved 1F1B (Megatron-LM): v chunks per rank placed round-robin
// (stage s on rank s % p). Microbatches run in groups of p per chunk; warm-up
// on rank r is (p - r - 1) * 2 + (v - 1) * p virtual microbatches. Megatron
// requires m % p == 0. Bubble time is the 1F1B bubble divided by v. With
// v = 1 it is 1F1B.
Schedule interleaved_1f1b(int p, int m, int v);

// ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism"): the 1F1B
// shape with every backward split into I and W, and rank r delaying its W
// passes by r microbatches so they fill the drain. In-flight microbatches
// at most p on every rank (1F1B's peak); with equal F, I, W costs the bubble
// is (p-1)(F+I-W), a third of 1F1B's (p-1)(F+I+W).
Schedule zb_h1(int p, int m);

// ZB-V: two chunks per rank in a V (stage s on rank s for s < p and on rank
// 2p-1-s after), so rank 0 holds the first and the last stage. The order is
// the one of the ZB-V paper's handcrafted schedule as torch's
// ScheduleZBVZeroBubble builds it (warm-up F0 / F1 F0 / F1 I1 W1, steady
// F0 I0 W0 F1 I1 W1, drain I0 I1 / I0 W0, then the remaining W).
Schedule zb_v(int p, int m);

// DualPipeV (DeepSeek's DualPipe cut to one V, as torch's ScheduleDualPipeV
// builds it from deepseek-ai/DualPipe): ZB-V's placement; warm-up F0, F0 F1,
// I1 W F1; a main phase of F0 B1 / F1 B0 pairs, which DualPipe overlaps and
// this IR runs forward first; a drain that splits the later backwards into
// I and W to fill the bubble. Needs m >= 2p.
Schedule dualpipe_v(int p, int m);

}  // namespace sextant::pp
