#!/usr/bin/env bash
# Bundles what sextant's GPU binaries need on a bare GPU machine (README.md,
# "GPUs"; docs/DESIGN.md, "The GPU path"): a CUDA build made here plus the shared
# libraries it needs that are not on such a machine (OpenMPI with its
# launcher, OpenBLAS, their dependencies), taken from Debian .deb files
# (apt-get download) unpacked with dpkg -x. scripts/device_check.sh runs it.
#
#   scripts/bundle_gpu.sh [--build DIR] [--out DIR] [--with-dev]
#
#   --build DIR   a CUDA build of sextant (default build-cuda); its GPU test
#                 and benchmark binaries must be built
#   --out DIR     the bundle (default build-bundle: ignored by git, small
#                 enough to copy to a GPU machine)
#   --with-dev    also the headers and CMake files to build there instead
#                 (device_check.sh --build)
#
# The bundle holds bin/ (the binaries), expectations/ (sextant qualify's
# thresholds per device kind), root.tar.xz (the unpacked packages,
# compressed; env.sh unpacks them once into a temporary folder), env.sh
# (PATH, LD_LIBRARY_PATH, OpenMPI relocation and transport settings) and
# MANIFEST (packages, versions, binaries, git revision). The downloaded .debs
# are cached in ~/.cache/sextant-debs (SEXTANT_DEB_CACHE). Not bundled:
# glibc, libstdc++ and libgcc (the GPU machine's own are newer) and the CUDA
# libraries (cudart, cuBLAS, NCCL: hundreds of MB, and there with the
# toolkit or PyTorch's wheels; device_check.sh finds them).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
build=$repo/build-cuda
out=$repo/build-bundle
with_dev=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --out) out=$2; shift 2 ;;
    --with-dev) with_dev=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "bundle_gpu.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
multiarch=x86_64-linux-gnu

die() { echo "bundle_gpu.sh: $*" >&2; exit 1; }

# 1. The binaries the device check runs.
binaries=(sextant ops_cuda_bench ops_cuda_test harness_gpu_test harness_mpi_test)
declare -A binary_path
for b in "${binaries[@]}"; do
  p=$(find "$build" -maxdepth 4 -type f -name "$b" -perm -u+x -print -quit 2>/dev/null || true)
  [ -n "$p" ] || die "$b not found under $build: build it first (cmake --build $build --target $b)"
  binary_path[$b]=$p
done
libs_of_sextant=$(ldd "${binary_path[sextant]}")
grep -q libnccl <<< "$libs_of_sextant" ||
  die "${binary_path[sextant]} does not link NCCL: $build is not a CUDA build (configure without -DSEXTANT_CUDA=OFF)"

# 2. Which packages: OpenMPI's launcher and runtime, then every package that
#    owns a shared library the binaries or OpenMPI's plugins load.
ompi_lib=/usr/lib/$multiarch/openmpi/lib/openmpi3
# Transport plugins for InfiniBand, UCX, libfabric and PSM: a single-node GPU
# check uses shared memory (btl vader); their dozens of libraries stay out.
dropped_plugins='mca_(atomic_ucx|btl_ofi|btl_openib|btl_uct|mtl_ofi|mtl_psm|mtl_psm2|osc_ucx|pml_ucx|spml_ucx|sshmem_ucx)\.so$'
[ -d "$ompi_lib" ] || die "OpenMPI plugins not found at $ompi_lib: run scripts/install_deps.sh first"
scan=("${binary_path[@]}" "$(readlink -f "$(command -v orterun)")")
for f in "$ompi_lib"/*.so; do [[ $(basename "$f") =~ $dropped_plugins ]] || scan+=("$f"); done
while IFS= read -r f; do scan+=("$f"); done < <(ls /usr/lib/$multiarch/pmix2/lib/pmix/*.so 2>/dev/null)

owner_of() {  # the package that installed a file (usrmerge: try /usr and / forms)
  local real=$1 alt
  alt=${real#/usr}
  dpkg -S "$real" 2>/dev/null | head -1 | cut -d: -f1 && return
  dpkg -S "$alt" 2>/dev/null | head -1 | cut -d: -f1 && return
  true
}
declare -A packages=([openmpi-bin]=1 [openmpi-common]=1 [libopenmpi3]=1 [libpmix2]=1)
declare -A needed_by
base_packages='^(libc6|libstdc\+\+6|libgcc-s1)$'
for f in "${scan[@]}"; do
  while IFS= read -r lib; do needed_by[$(readlink -f "$lib")]=$f; done < <(ldd "$f" 2>/dev/null | awk '/=> \//{print $3}')
done
for lib in "${!needed_by[@]}"; do
  case $lib in /usr/local/cuda*|*/libcuda.so*|*/libnccl.so*|*/libcublas*|*/libcudart*) continue ;; esac
  pkg=$(owner_of "$lib")
  [ -n "$pkg" ] || die "no Debian package owns $lib (needed by ${needed_by[$lib]})"
  [[ $pkg =~ $base_packages ]] || packages[$pkg]=1
done
if [ $with_dev -eq 1 ]; then
  for p in libopenmpi-dev libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread nlohmann-json3-dev \
           libcli11-dev libgtest-dev libgmock-dev googletest libbenchmark-dev libpmix-dev libhwloc-dev \
           libevent-dev pkg-config; do
    packages[$p]=1
  done
fi

# 3. Download (cached outside the bundle, so it is not carried) and unpack.
debs=${SEXTANT_DEB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sextant-debs}
mkdir -p "$debs"
names=$(printf '%s\n' "${!packages[@]}" | sort)
echo "bundle_gpu.sh: $(echo "$names" | wc -l) packages: $(echo $names)"
(cd "$debs" && for p in $names; do
   v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null || true)
   spec=$p${v:+=$v}  # the version installed here, which the build linked against
   ls "${p}_"*.deb >/dev/null 2>&1 || apt-get download -q "$spec" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
   # The installed version gone from the archive (a security update replaced
   # it): the archive's own, the same soname.
   ls "${p}_"*.deb >/dev/null 2>&1 || apt-get download -q "$p" 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
   ls "${p}_"*.deb >/dev/null 2>&1 || { echo "bundle_gpu.sh: apt-get download $spec failed" >&2; exit 1; }
 done)
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/root"
for p in $names; do
  dpkg -x "$(ls "$debs/${p}_"*.deb | tail -1)" "$staging/root"
done
# Nothing a run reads: documentation, manuals, the dropped plugins, and the
# LAPACK / reference-BLAS alternatives of the OpenBLAS package (the binaries
# link libopenblas.so.0 itself).
rm -rf "$staging/root/usr/share/doc" "$staging/root/usr/share/man" "$staging/root/usr/share/lintian" \
  "$staging/root/usr/share/locale"
rm -f "$staging/root/usr/lib/$multiarch/openblas-pthread/liblapack.so.3" \
  "$staging/root/usr/lib/$multiarch/openblas-pthread/libblas.so.3"
find "$staging/root$ompi_lib" -maxdepth 1 -name '*.so' | grep -E "$dropped_plugins" | xargs -r rm -f
# What Debian's alternatives system would link: mpirun, mpiexec, mpicc, ...
for tool in mpirun mpiexec mpicc mpicxx mpic++; do
  [ -e "$staging/root/usr/bin/$tool.openmpi" ] && ln -sf "$tool.openmpi" "$staging/root/usr/bin/$tool"
done
# Compressed (OpenBLAS alone is 36 MB unpacked): env.sh unpacks it once,
# outside the bundle, so the bundle stays small enough to carry.
rm -rf "$out/root" "$out/root.tar.xz"
tar -C "$staging" -cf - root | xz -6 -T1 > "$out/root.tar.xz"

# 4. Binaries.
rm -rf "${out:?}/bin"
mkdir -p "$out/bin"
for b in "${binaries[@]}"; do cp "${binary_path[$b]}" "$out/bin/"; done
strip --strip-debug "$out"/bin/* 2>/dev/null || true
# sextant qualify looks for its thresholds in expectations/ beside bin/.
rm -rf "${out:?}/expectations"
cp -r "$(dirname "$0")/../results/expectations" "$out/expectations"

# 5. The environment a run needs.
cat > "$out/env.sh" <<EOF
# Source this file (from any folder) to run the bundled sextant binaries.
bundle=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")" && pwd)
# root.tar.xz unpacks once per content into a temporary folder (not into the bundle).
root=\${SEXTANT_BUNDLE_ROOT:-\${TMPDIR:-/tmp}/sextant-bundle-\$(cksum < "\$bundle/root.tar.xz" | cut -d' ' -f1)}/root
if [ ! -d "\$root" ]; then
  mkdir -p "\$(dirname "\$root")"
  if command -v xz >/dev/null; then
    xz -dc "\$bundle/root.tar.xz" | tar -C "\$(dirname "\$root")" -xf -
  else  # no xz there: Python's tarfile reads it too
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "\$bundle/root.tar.xz" "\$(dirname "\$root")"
  fi || { echo "env.sh: cannot unpack \$bundle/root.tar.xz into \$(dirname "\$root")" >&2; return 1; }
fi
export PATH=\$bundle/bin:\$root/usr/bin:\$PATH
export LD_LIBRARY_PATH=\$root/usr/lib/$multiarch:\$root/usr/lib/$multiarch/openblas-pthread:\$root/lib/$multiarch:\$root/usr/lib/$multiarch/openmpi/lib:\$root/usr/lib/$multiarch/pmix2/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
# OpenMPI and PMIx were built for /usr: point them at the unpacked tree.
export OPAL_PREFIX=\$root/usr
export OPAL_LIBDIR=\$root/usr/lib/$multiarch/openmpi/lib
export OPAL_SYSCONFDIR=\$root/etc/openmpi
export OPAL_PKGDATADIR=\$root/usr/share/openmpi
export OPAL_PKGLIBDIR=\$root$ompi_lib
export PMIX_INSTALL_PREFIX=\$root/usr/lib/$multiarch/pmix2
export PMIX_MCA_mca_base_component_path=\$root/usr/lib/$multiarch/pmix2/lib/pmix
export OMPI_MCA_mca_base_component_path=\$root$ompi_lib
export OMPI_MCA_mca_base_param_files=\$root/etc/openmpi/openmpi-mca-params.conf
# One node, no network fabric: shared memory and self only.
# (single-copy off: process_vm_readv is often refused inside containers and VMs)
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OPENBLAS_NUM_THREADS=\${OPENBLAS_NUM_THREADS:-1}
EOF
if [ $with_dev -eq 1 ]; then
  cat >> "$out/env.sh" <<EOF
# Building there (device_check.sh --build): headers, CMake packages, pkg-config.
export CMAKE_PREFIX_PATH=\$root/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}
export PKG_CONFIG_PATH=\$root/usr/lib/$multiarch/pkgconfig:\$root/usr/lib/$multiarch/openblas-pthread/pkgconfig:\$root/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=\$root
export CPATH=\$root/usr/include:\$root/usr/include/$multiarch\${CPATH:+:\$CPATH}
export LIBRARY_PATH=\$root/usr/lib/$multiarch:\$root/usr/lib/$multiarch/openblas-pthread\${LIBRARY_PATH:+:\$LIBRARY_PATH}
EOF
fi

# 6. What is in it.
{
  echo "sextant GPU bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  dirty=$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null || true)
  echo "git: $(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)${dirty:+-dirty}"
  echo "build: $build"
  echo "binaries:"
  for b in "${binaries[@]}"; do echo "  $b $(sha256sum "$out/bin/$b" | cut -c1-16)"; done
  echo "needed from the GPU machine: glibc >= $(ldd --version | head -1 | awk '{print $NF}'), libstdc++ (GCC >= $(gcc -dumpversion 2>/dev/null || echo '?')), NVIDIA driver for CUDA $(awk -F'"' '/CMAKE_CUDA_COMPILER_VERSION/{print $2}' "$build/CMakeFiles/"*/CMakeCUDACompiler.cmake 2>/dev/null | head -1),"
  echo "  libcudart.so.13, libcublas.so.13, libcublasLt.so.13, libnccl.so.2 (toolkit or PyTorch's nvidia wheels)"
  echo "packages:"
  for p in $names; do
    deb=$(ls "$debs/${p}_"*.deb | tail -1)
    echo "  $p $(dpkg-deb -f "$deb" Version)"
  done
} > "$out/MANIFEST"

size=$(du -sm "$out" | cut -f1)
echo "bundle_gpu.sh: $out: ${size} MiB (copy it with the repository to the GPU machine, then run scripts/device_check.sh OUT there)"
[ "$size" -lt 60 ] || echo "bundle_gpu.sh: warning: over 60 MiB, more than a build of the GPU binaries needs" >&2
