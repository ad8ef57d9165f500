#!/usr/bin/env bash
# gpu-kit.sh — one relocatable archive of the CUDA build: cnnscale, the `gpu` tests and
# the GPU benchmarks, with every shared library they load except glibc, libstdc++/libgcc
# and the CUDA libraries, Open MPI's and PMIx's components and help files, and
# kit-env.sh, which makes it run from wherever it is unpacked on a GPU node that has a
# CUDA 13 driver and CUDA's libraries (/usr/local/cuda, $CUDA_HOME, or a Python
# environment's nvidia-* wheels) and no HDF5, Open MPI, PMIx or oneDNN (docs/gpu.md,
# "The GPU kit"). No rebuild on the GPU node.
#
#   scripts/gpu-kit.sh [--build DIR] [--output FILE.tar.gz] [--max-mib 48]
#
# The build must have CUDA (cmake found nvcc, cuDNN, NCCL). Default output:
# DIR/cnnscale-gpu-kit.tar.gz; an --output that is a folder gets that name inside it, one
# that is a symbolic link is written through (the link stays), and anything else that
# is not a regular file (a device, a FIFO) is refused before any work. Use it:
#   tar xzf cnnscale-gpu-kit.tar.gz && source cnnscale-kit/kit-env.sh
#   cnnscale-kit/kit-check.sh                      # every library found? (names what is not)
#   cnnscale env; bench/gpu-first-run.sh --out DIR # (the kit's copy: cnnscale-kit/src/bench)
# Layout: bin/ (cnnscale, mpiexec → orterun, orted, ompi_info, h5diff, h5dump, bn_kernel_bench),
# tests/ (the gpu test programs and their helpers, as build/tests), lib/ (the libraries;
# lib/openmpi, lib/pmix: components), share/, etc/, src/ (tests/ and bench/ scripts),
# tests.tsv (the `gpu` label's tests as CTest defines them, paths made kit-relative),
# kit-env.sh, kit-check.sh, KIT.txt (what it was built from).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$ROOT/build OUTPUT="" MAX_MIB=48
while [ $# -gt 0 ]; do
  case $1 in
    --build) BUILD=$(cd "$2" && pwd -P) || { echo "gpu-kit.sh: error: --build $2: no such folder" >&2; exit 2; }; shift 2 ;;
    --output) OUTPUT=$2; shift 2 ;;
    --max-mib) MAX_MIB=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    *) echo "gpu-kit.sh: error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
OUTPUT=${OUTPUT:-$BUILD/cnnscale-gpu-kit.tar.gz}
die() { echo "gpu-kit.sh: error: $*" >&2; exit 1; }
[ -d "$OUTPUT" ] && OUTPUT=${OUTPUT%/}/cnnscale-gpu-kit.tar.gz
[ -L "$OUTPUT" ] && OUTPUT=$(readlink -f "$OUTPUT")
[ -e "$OUTPUT" ] && [ ! -f "$OUTPUT" ] && die "--output $OUTPUT exists and is not a regular file; name a file or a folder"
[ -d "$(dirname "$OUTPUT")" ] || die "--output $OUTPUT: its folder $(dirname "$OUTPUT") does not exist; make it first"
for t in patchelf ldd readelf ctest python3 strip; do
  command -v $t >/dev/null || die "$t not found (scripts/install-deps.sh installs it)"
done
CNN=$BUILD/bin/cnnscale
[ -x "$CNN" ] || die "$CNN not built (scripts/build.sh)"
readelf -d "$CNN" | grep -q 'libcudart' ||
  die "$CNN was built without CUDA (no libcudart in its NEEDED list); build with the CUDA toolkit under /usr/local/cuda (docs/gpu.md)"
MPIEXEC_REAL=$(readlink -f "$(command -v mpiexec)") || die "mpiexec not found (openmpi-bin)"
OMPI_BIN=$(dirname "$MPIEXEC_REAL")
ompi_path() { ompi_info --path "$1" --parsable | sed -n "s/^path:$1://p"; }
OMPI_PKGLIB=$(ompi_path pkglibdir) OMPI_PKGDATA=$(ompi_path pkgdatadir) OMPI_SYSCONF=$(ompi_path sysconfdir)
[ -d "$OMPI_PKGLIB" ] || die "Open MPI's component folder not found (ompi_info --path pkglibdir: '$OMPI_PKGLIB')"
PMIX_LIB=$(ldd "$OMPI_PKGLIB"/mca_pmix_ext*.so 2>/dev/null | awk '/libpmix\.so/ {print $3; exit}')
[ -n "$PMIX_LIB" ] || die "no external PMIx behind Open MPI (mca_pmix_ext*.so); this script knows Debian 12's layout"
PMIX_PREFIX_DIR=$(dirname "$(dirname "$(readlink -f "$PMIX_LIB")")")  # …/pmix2
[ -d "$PMIX_PREFIX_DIR/lib/pmix" ] || die "PMIx's component folder $PMIX_PREFIX_DIR/lib/pmix not found"

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/cnnscale-kit.XXXXXX")
trap 'rm -rf "$STAGE" "$OUTPUT.tmp-$$"' EXIT
K=$STAGE/cnnscale-kit
mkdir -p "$K"/{bin,tests,lib/openmpi,lib/pmix,share/openmpi,share/pmix,etc/openmpi,etc/pmix,src}

# Programs. The tests' helpers are those the test scripts call as $CNNSCALE_BUILD/tests/NAME.
cp "$CNN" "$K/bin/cnnscale"
cp "$MPIEXEC_REAL" "$K/bin/orterun"
ln -s orterun "$K/bin/mpiexec"; ln -s orterun "$K/bin/mpirun"
for p in orted ompi_info; do [ -x "$OMPI_BIN/$p" ] && cp "$(readlink -f "$OMPI_BIN/$p")" "$K/bin/$p"; done
for p in h5diff h5dump; do cp "$(readlink -f "$(command -v $p)")" "$K/bin/$p" || die "$p not found (hdf5-tools)"; done
# The kernels' development benches (bench/kernels/, GPU-KERNELS.md), run by gpu-first-run.sh.
for p in bn_kernel_bench; do [ -x "$BUILD/bin/$p" ] && cp "$BUILD/bin/$p" "$K/bin/$p"; done
(cd "$BUILD" && ctest -L gpu -LE slurm --show-only=json-v1) >"$STAGE/ctest.json"
helpers=$(grep -rhoE 'CNNSCALE_BUILD/tests/[A-Za-z0-9_]+' "$ROOT/tests" | sed 's|.*/||' | sort -u)
progs=$(python3 - "$STAGE/ctest.json" "$BUILD" <<'PY'
import json, os, sys
build = os.path.realpath(sys.argv[2])
for t in json.load(open(sys.argv[1]))["tests"]:
    for w in t.get("command", []):
        if w.startswith("/") and os.path.realpath(w).startswith(build + "/tests/") and os.access(w, os.X_OK):
            print(os.path.basename(w))
PY
)
for p in $(printf '%s\n' $helpers $progs | sort -u); do
  [ -x "$BUILD/tests/$p" ] && cp "$BUILD/tests/$p" "$K/tests/$p"
done
[ -x "$K/tests/test_cuda_model_gpu" ] || die "$BUILD/tests/test_cuda_model_gpu not built (the gpu tests need CUDA and googletest)"
strip --strip-unneeded "$K/bin/cnnscale"  # the test programs keep their symbols (backtraces on a first run)

# Components (their heavy network stacks left out: UCX, libfabric, verbs; Debian's own
# openmpi-mca-params.conf disables them; NCCL carries the GPU traffic), help files, defaults.
for f in "$OMPI_PKGLIB"/*.so; do
  case $(basename "$f") in *ucx*|*ofi*|*openib*|*verbs*|*uct*|*java*|*psm*|*portals*) continue ;; esac
  cp "$f" "$K/lib/openmpi/"
done
cp "$PMIX_PREFIX_DIR"/lib/pmix/*.so "$K/lib/pmix/"
cp -r "$OMPI_PKGDATA"/. "$K/share/openmpi/"
cp -r "$PMIX_PREFIX_DIR"/share/pmix/. "$K/share/pmix/"
[ -f "$PMIX_PREFIX_DIR/share/pmix-mca-params.conf" ] && cp "$PMIX_PREFIX_DIR/share/pmix-mca-params.conf" "$K/etc/pmix/"
cp "$OMPI_SYSCONF"/*.conf "$OMPI_SYSCONF"/*hostfile* "$K/etc/openmpi/" 2>/dev/null || true

# Shared libraries: ldd's transitive list for every program and component, less what every
# GPU node has (glibc, the GCC runtime) and the CUDA libraries (the node's own, found by
# kit-env.sh: they must match its driver, and cuDNN + cuBLAS + NCCL are ~1.5 GB).
is_system() {
  case $1 in
    ld-linux*|libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|libutil.so.*|libanl.so.*) return 0 ;;
    libstdc++.so.*|libgcc_s.so.*) return 0 ;;
    libcuda.so.*|libcudart.so.*|libcublas*.so.*|libcudnn*.so.*|libnccl.so.*|libnvrtc*|libnvJitLink*|libnvidia-*) return 0 ;;
    libcufft*|libcurand*|libcusolver*|libcusparse*|libcupti*|libnvToolsExt*) return 0 ;;
  esac
  return 1
}
cuda_needed=""
elfs=("$K"/bin/* "$K"/tests/* "$K"/lib/openmpi/*.so "$K"/lib/pmix/*.so)
for e in "${elfs[@]}"; do
  [ -L "$e" ] && continue
  ldd "$e" 2>/dev/null | awk '$2 == "=>" {print $1, $3}'
done | sort -u >"$STAGE/deps.txt"
while read -r name path; do
  if [ "$path" = "not" ]; then
    is_system "$name" || die "a program of the kit needs $name, which this machine does not have (ldd says 'not found')"
  fi
  if is_system "$name"; then
    case $name in libcud*|libcublas*|libnccl*) cuda_needed="$cuda_needed $name" ;; esac
    continue
  fi
  [ -e "$K/lib/$name" ] || cp -L "$path" "$K/lib/$name"
done <"$STAGE/deps.txt"
cuda_needed=$(printf '%s\n' $cuda_needed | sort -u | tr '\n' ' ')

# Run paths: every ELF finds the kit's libraries beside it, then /usr/local/cuda's.
for e in "$K"/bin/* "$K"/tests/*; do
  [ -L "$e" ] || patchelf --set-rpath '$ORIGIN/../lib:/usr/local/cuda/lib64:/usr/local/cuda/lib' "$e"
done
for e in "$K"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$e"; done
for e in "$K"/lib/openmpi/*.so "$K"/lib/pmix/*.so; do patchelf --set-rpath '$ORIGIN/..' "$e"; done

# Scripts: the test and bench scripts with what they source or run; the test list.
mkdir -p "$K/src/tests" "$K/src/bench"
(cd "$ROOT" && find tests -type f \( -name '*.sh' -o -name '*.py' -o -name '*.hpp' \) -print0 |
  xargs -0 cp --parents -t "$K/src")
cp "$ROOT"/bench/gpu-first-run.sh "$ROOT"/bench/gpu-precision.sh "$ROOT"/bench/pytorch_gpu_resnet.py "$K/src/bench/"
python3 - "$STAGE/ctest.json" "$BUILD" "$ROOT" "$MPIEXEC_REAL" >"$K/tests.tsv" <<'PY'
# name <TAB> timeout seconds <TAB> skip return code <TAB> environment (k=v;…) <TAB> command (shell words);
# '-' for an empty field;
# @KIT@ stands for the unpacked kit's folder.
# Paths are compared as real paths: CTest names the build and the source as cmake saw
# them, which need not be how --build or this script's folder were given (a symbolic link).
import json, os, shlex, sys
j, mpiexec = json.load(open(sys.argv[1])), sys.argv[4]
build, root = os.path.realpath(sys.argv[2]), os.path.realpath(sys.argv[3])
def kit(w):
    if w in (mpiexec, "/usr/bin/mpiexec", "/usr/bin/mpirun") or os.path.basename(w) in ("mpiexec", "orterun"):
        return "@KIT@/bin/mpiexec"
    r = os.path.realpath(w) if w.startswith("/") else w
    if r == build + "/bin/cnnscale": return "@KIT@/bin/cnnscale"
    for a, b in ((build + "/tests/", "@KIT@/tests/"), (root + "/tests/", "@KIT@/src/tests/"),
                 (root + "/bench/", "@KIT@/src/bench/"), (build + "/", "@KIT@/"), (root + "/", "@KIT@/src/")):
        if r.startswith(a): return b + r[len(a):]
    if r in (build, root): return "@KIT@" if r == build else "@KIT@/src"
    return w
for t in j["tests"]:
    props = {p["name"]: p["value"] for p in t.get("properties", [])}
    env = [e.split("=", 1)[0] + "=" + kit(e.split("=", 1)[1]) for e in props.get("ENVIRONMENT", []) if "=" in e]
    cmd = " ".join(shlex.quote(kit(w)) for w in t["command"])
    print("\t".join([t["name"], str(int(float(props.get("TIMEOUT", 600)))), str(props.get("SKIP_RETURN_CODE", "-")),
                     ";".join(env) or "-", cmd]))
PY

cat >"$K/kit-env.sh" <<EOF
# kit-env.sh — source it (bash): the unpacked cnnscale GPU kit on PATH, Open MPI and PMIx
# relocated into it, and the machine's CUDA libraries on LD_LIBRARY_PATH.
# CUDA libraries this kit's programs need: $cuda_needed
# Looked for, per library, in this order: \$CNNSCALE_CUDA_LIBS (folders, ':'-separated),
# \$CUDA_HOME/lib64, /usr/local/cuda/lib64, /usr/local/cuda/lib, then the nvidia-* wheels
# (nvidia/*/lib) of \$CNNSCALE_PYTHON, python3 on PATH and /opt/torch/.venv/bin/python3.
CNNSCALE_KIT_NEEDS="$cuda_needed"
EOF
cat >>"$K/kit-env.sh" <<'EOF'
CNNSCALE_KIT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export CNNSCALE_KIT
export PATH="$CNNSCALE_KIT/bin:$PATH"
export OPAL_PREFIX="$CNNSCALE_KIT" OPAL_EXEC_PREFIX="$CNNSCALE_KIT" OPAL_BINDIR="$CNNSCALE_KIT/bin" \
  OPAL_SBINDIR="$CNNSCALE_KIT/bin" OPAL_LIBEXECDIR="$CNNSCALE_KIT/bin" OPAL_LIBDIR="$CNNSCALE_KIT/lib" \
  OPAL_PKGLIBDIR="$CNNSCALE_KIT/lib/openmpi" OPAL_DATAROOTDIR="$CNNSCALE_KIT/share" OPAL_DATADIR="$CNNSCALE_KIT/share" \
  OPAL_PKGDATADIR="$CNNSCALE_KIT/share/openmpi" OPAL_SYSCONFDIR="$CNNSCALE_KIT/etc/openmpi"
export PMIX_PREFIX="$CNNSCALE_KIT" PMIX_EXEC_PREFIX="$CNNSCALE_KIT" PMIX_BINDIR="$CNNSCALE_KIT/bin" \
  PMIX_LIBDIR="$CNNSCALE_KIT/lib" PMIX_PKGLIBDIR="$CNNSCALE_KIT/lib/pmix" PMIX_DATAROOTDIR="$CNNSCALE_KIT/share" \
  PMIX_DATADIR="$CNNSCALE_KIT/share" PMIX_PKGDATADIR="$CNNSCALE_KIT/share/pmix" PMIX_SYSCONFDIR="$CNNSCALE_KIT/etc/pmix"
# Without ssh or rsh (containers, minimal images) Open MPI's rsh launcher refuses to start
# even for this node alone; leaving it out lets mpiexec use Slurm's launcher inside an
# allocation and the isolated one (this node only) elsewhere.
if [ -z "${OMPI_MCA_plm:-}" ] && ! command -v ssh >/dev/null 2>&1 && ! command -v rsh >/dev/null 2>&1; then
  export OMPI_MCA_plm=^rsh
fi
# The tests' variables (as CTest sets them) for running a kit test by hand.
export CNNSCALE="$CNNSCALE_KIT/bin/cnnscale" CNNSCALE_BUILD="$CNNSCALE_KIT" CNNSCALE_SOURCE="$CNNSCALE_KIT/src" \
  MPIEXEC="$CNNSCALE_KIT/bin/mpiexec"
cnnscale_kit_cuda() {
  local cands=() d py site lib found dirs=() missing=()
  [ -n "${CNNSCALE_CUDA_LIBS:-}" ] && IFS=: read -r -a cands <<<"$CNNSCALE_CUDA_LIBS"
  [ -n "${CUDA_HOME:-}" ] && cands+=("$CUDA_HOME/lib64" "$CUDA_HOME/lib")
  cands+=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib)
  for py in ${CNNSCALE_PYTHON:-} "$(command -v python3 2>/dev/null)" /opt/torch/.venv/bin/python3; do
    [ -x "$py" ] || continue
    site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null) || continue
    for d in "$site"/nvidia/*/lib; do [ -d "$d" ] && cands+=("$d"); done
  done
  for lib in $CNNSCALE_KIT_NEEDS; do
    found=""
    for d in "${cands[@]}"; do
      if [ -e "$d/$lib" ]; then found=$d; break; fi
    done
    if [ -z "$found" ]; then missing+=("$lib"); continue; fi
    case ":$(IFS=:; echo "${dirs[*]}"):" in *":$found:"*) ;; *) dirs+=("$found") ;; esac
  done
  CNNSCALE_KIT_CUDA_DIRS=$(IFS=:; echo "${dirs[*]}")
  CNNSCALE_KIT_CUDA_MISSING="${missing[*]}"
  if [ ${#missing[@]} -gt 0 ]; then
    echo "cnnscale-kit: warning: CUDA libraries not found: ${missing[*]} (looked in: ${cands[*]}); cnnscale will not start. Fix: point CNNSCALE_CUDA_LIBS at the folders that hold them (a CUDA 13 toolkit with cuDNN 9 and NCCL 2, or a Python environment's nvidia-* wheels) and source kit-env.sh again" >&2
  fi
}
cnnscale_kit_cuda
[ -n "$CNNSCALE_KIT_CUDA_DIRS" ] && export LD_LIBRARY_PATH="$CNNSCALE_KIT_CUDA_DIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CNNSCALE_KIT_CUDA_DIRS CNNSCALE_KIT_CUDA_MISSING
EOF

cat >"$K/kit-check.sh" <<'EOF'
#!/usr/bin/env bash
# kit-check.sh — does every program and component of this kit find every library here?
# Prints each missing library with who needs it; exit 1 when any is missing, else 0.
source "$(dirname "$0")/kit-env.sh"
missing=0
for e in "$CNNSCALE_KIT"/bin/* "$CNNSCALE_KIT"/tests/* "$CNNSCALE_KIT"/lib/*.so* "$CNNSCALE_KIT"/lib/openmpi/*.so "$CNNSCALE_KIT"/lib/pmix/*.so; do
  [ -L "$e" ] && continue
  out=$(ldd "$e" 2>&1) || { echo "kit-check: ldd failed on $e: $out"; missing=1; continue; }
  while read -r lib; do
    echo "kit-check: ${e#$CNNSCALE_KIT/} needs $lib: not found"; missing=1
  done < <(awk '/not found/ {print $1}' <<<"$out")
done
if [ $missing = 0 ]; then
  echo "kit-check: every library found (CUDA from: ${CNNSCALE_KIT_CUDA_DIRS:-none})"
else
  echo "kit-check: missing libraries above; CUDA folders used: ${CNNSCALE_KIT_CUDA_DIRS:-none} (CNNSCALE_CUDA_LIBS adds folders)"
fi
exit $missing
EOF
chmod +x "$K/kit-check.sh"

{
  echo "cnnscale GPU kit"
  echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME") ($(uname -m))"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (plus uncommitted changes)')"
  echo "cnnscale: $("$CNN" --version 2>/dev/null | head -n 1)"
  echo "CUDA libraries expected on the node: $cuda_needed"
  echo "glibc of the build machine: $(ldd --version | head -n 1) (the node's must be the same or newer)"
} >"$K/KIT.txt"

tar -C "$STAGE" -czf "$OUTPUT.tmp-$$" cnnscale-kit
mv "$OUTPUT.tmp-$$" "$OUTPUT"
size=$(stat -c %s "$OUTPUT")
mib=$(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1048576}')
echo "gpu-kit.sh: $OUTPUT: $mib MiB, $(ls "$K/lib" | wc -l) libraries + $(ls "$K/lib/openmpi" | wc -l) Open MPI and $(ls "$K/lib/pmix" | wc -l) PMIx components, $(ls "$K/tests" | wc -l) test programs, $(wc -l <"$K/tests.tsv") gpu tests"
if [ "$size" -gt $((MAX_MIB * 1048576)) ]; then
  echo "gpu-kit.sh: error: the kit is $mib MiB, over the ${MAX_MIB} MiB limit (--max-mib)" >&2
  exit 1
fi
