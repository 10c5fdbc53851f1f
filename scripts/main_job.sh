#!/usr/bin/env bash
# The main job: install what is missing (scripts/install_deps.sh), build
# sextant, run every suite at small sizes at several rank counts in ONE
# launch (1, 2 and 4 ranks by default, on CPU with MPI), write the results
# JSON, validate it, and turn it into a report.
#
#   bash scripts/main_job.sh                 # 4 MPI ranks on this machine
#   NP=8 bash scripts/main_job.sh            # more ranks (oversubscribed is fine)
#   bash scripts/main_job.sh --profile ci    # extra flags go to `sextant run`
#
# Output: out/results/sextant-<run id>.json, out/traces/ (pipeline Chrome
# traces), out/junit/sextant-<run id>.xml, out/report/index.html.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
np=${NP:-4}
out=${OUT:-out}
build=${BUILD:-build}

if [ "${SEXTANT_SKIP_INSTALL:-0}" != 1 ]; then
  bash scripts/install_deps.sh
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake --preset default
fi
cmake --build "$build" --target sextant

# OpenMPI refuses to run as root unless told; containers and CI run as root.
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
# One BLAS thread per rank unless the user says otherwise (sextant also caps it).
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
source scripts/openblas_coretype.sh

mkdir -p "$out/results"
ranks=1
r=2
while [ "$r" -le "$np" ]; do ranks="$ranks,$r"; r=$((r * 2)); done
before=$(ls "$out/results" 2>/dev/null | wc -l)
status=0
mpirun --oversubscribe -np "$np" "$build/sextant" run --ranks "$ranks" -o "$out/results" \
  --traces "$out/traces" --junit "$out/junit/" "$@" || status=$?
latest=$(ls -t "$out"/results/sextant-*.json 2>/dev/null | head -n 1 || true)
if [ -z "$latest" ] || [ "$(ls "$out/results" | wc -l)" -le "$before" ]; then
  echo "main job: no results file was written" >&2
  exit "${status:-1}"
fi
python3 scripts/validate.py "$latest"
python3 scripts/report.py "$latest" -o "$out/report"
echo "main job: results $latest, report $out/report/index.html (sextant exit $status)"
exit "$status"
