# Sourced by the run scripts: OpenBLAS 0.3.21 runs generic SSE3 kernels on
# CPUs it does not know (recent Xeons), ~6x slower; name the kernels this CPU
# supports unless the user already chose (sextant warns when the choice is poor).
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -r /proc/cpuinfo ]; then
  _flags=$(grep -m1 '^flags' /proc/cpuinfo)
  _has() { [[ " $_flags " == *" $1 "* ]]; }
  if _has avx512f && _has avx512bw && _has avx512vl && _has avx512dq; then export OPENBLAS_CORETYPE=SkylakeX
  elif _has avx2 && _has fma; then export OPENBLAS_CORETYPE=Haswell; fi
  unset -f _has; unset _flags
fi
