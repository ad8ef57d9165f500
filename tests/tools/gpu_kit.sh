#!/usr/bin/env bash
# gpu_kit.sh — the GPU kit (scripts/gpu-kit.sh, issue 25) runs from where it is unpacked
# on a machine that has none of install-deps.sh's packages: a Debian 12 *minbase* root
# (debootstrap; no Open MPI, PMIx, HDF5, oneDNN, Boost, protobuf, Python), with only
# the machine's CUDA libraries (this machine's /usr/local/cuda bind-mounted read-only, as
# a GPU node's toolkit), no GPU driver and no ssh. In the root, from the kit alone:
#  - kit-check.sh finds every library of every program and component;
#  - `cnnscale --version`; `cnnscale env` names why there is no GPU (the CUDA error);
#  - `mpiexec -n 2 cnnscale train --synthetic --max-steps 5` (the kit's Open MPI,
#    relocated) trains and writes run.json;
#  - bench/gpu-first-run.sh reports "no GPU: <reason>", runs every gpu test of the kit,
#    each SKIPs (none fails), and exits 4;
#  - a library taken out of the unpacked kit makes kit-check.sh fail naming it;
#  - kit-env.sh takes each CUDA library from the first folder that has it ($CUDA_HOME, a
#    Python environment's nvidia-* wheels, $CNNSCALE_CUDA_LIBS), and names the missing
#    ones when there are none.
# And the archive is at most 48 MiB; --output naming a folder writes the archive into it,
# --build through a symbolic link makes the same kit, --output through one writes through
# it, a FIFO or a missing folder as --output is refused (issue 39 item 3). The minbase root is made once with debootstrap
# from the Debian mirror apt is configured with (scripts/debian-mirror.sh: enabled
# sources only, Debian's archive over third-party lists; CNNSCALE_DEBIAN_MIRROR sets it)
# and cached as /var/cache/cnnscale/minbase-bookworm.tar.
# SKIP (77) when not root (chroot, mounts) or when cnnscale was built without CUDA
# (the kit is the CUDA build's).
set -u
source "$CNNSCALE_SOURCE/tests/lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (chroot and bind mounts)"; exit 77; }
readelf -d "$CNNSCALE" | grep -q libcudart || { echo "SKIP: $CNNSCALE was built without CUDA: there is no GPU kit to make"; exit 77; }
"$CNNSCALE_SOURCE/scripts/gpu-kit.sh" --build "$CNNSCALE_BUILD" --output "$TMP/kit.tar.gz" >"$TMP/kit.out" 2>&1
expect_eq "scripts/gpu-kit.sh exit status ($(tail -n 1 "$TMP/kit.out"))" 0 "$?"
size=$(stat -c %s "$TMP/kit.tar.gz" 2>/dev/null || echo 0)
expect_eq "the archive is at most 48 MiB ($((size / 1048576)) MiB)" 1 "$([ "$size" -gt 0 ] && [ "$size" -le $((48 * 1048576)) ] && echo 1)"

# --output naming an existing folder: the archive goes into it under its default name
# (it once became FOLDER/FOLDER-name.tmp, reported as "0.0 MiB", exit 0). --build through a
# symbolic link: the same kit (CTest names the real path; it once lost 2 of 10 test
# programs). --output through a symbolic link: written through, the link kept. A FIFO or a
# missing folder as --output: refused at once, the FIFO left alone.
mkdir "$TMP/kits"
ln -s "$CNNSCALE_BUILD" "$TMP/build-link"
"$CNNSCALE_SOURCE/scripts/gpu-kit.sh" --build "$TMP/build-link" --output "$TMP/kits" >"$TMP/kit2.out" 2>&1
expect_eq "gpu-kit.sh --build LINK --output FOLDER: exit status ($(tail -n 1 "$TMP/kit2.out"))" 0 "$?"
expect_eq "--output FOLDER: it holds cnnscale-gpu-kit.tar.gz alone" cnnscale-gpu-kit.tar.gz "$(ls -A "$TMP/kits")"
expect_grep "--output FOLDER: the summary names the file, not the folder" \
  "^gpu-kit.sh: $TMP/kits/cnnscale-gpu-kit.tar.gz: [1-9][0-9.]* MiB" "$TMP/kit2.out"
mkdir "$TMP/k1" "$TMP/k2"
tar -C "$TMP/k1" -xzf "$TMP/kit.tar.gz" cnnscale-kit/tests.tsv cnnscale-kit/tests
tar -C "$TMP/k2" -xzf "$TMP/kits/cnnscale-gpu-kit.tar.gz" cnnscale-kit/tests.tsv cnnscale-kit/tests
expect_eq "--build LINK: the same test programs as --build DIR ($(ls "$TMP/k1/cnnscale-kit/tests" | wc -l))" \
  "$(ls "$TMP/k1/cnnscale-kit/tests")" "$(ls "$TMP/k2/cnnscale-kit/tests" 2>&1)"
expect_eq "--build LINK: the same tests.tsv" "$(cat "$TMP/k1/cnnscale-kit/tests.tsv")" "$(cat "$TMP/k2/cnnscale-kit/tests.tsv" 2>&1)"
echo old >"$TMP/kit-target.tar.gz"
ln -s kit-target.tar.gz "$TMP/kit-link.tar.gz"
"$CNNSCALE_SOURCE/scripts/gpu-kit.sh" --build "$CNNSCALE_BUILD" --output "$TMP/kit-link.tar.gz" >"$TMP/kit3.out" 2>&1
expect_eq "--output LINK: exit status ($(tail -n 1 "$TMP/kit3.out"))" 0 "$?"
expect_eq "--output LINK: still a link to the same file" kit-target.tar.gz "$(readlink "$TMP/kit-link.tar.gz")"
expect_eq "--output LINK: written through (the kit's listing)" "$(tar tzf "$TMP/kit.tar.gz" | sort)" "$(tar tzf "$TMP/kit-target.tar.gz" 2>&1 | sort)"
rm -f "$TMP/kit-target.tar.gz" "$TMP/kit-link.tar.gz"
mkfifo "$TMP/fifo"
"$CNNSCALE_SOURCE/scripts/gpu-kit.sh" --build "$CNNSCALE_BUILD" --output "$TMP/fifo" >"$TMP/fifo.out" 2>&1
expect_eq "--output FIFO: exit status 1" 1 "$?"
expect_grep "--output FIFO: refused, naming it" "^gpu-kit.sh: error: --output $TMP/fifo exists and is not a regular file" "$TMP/fifo.out"
expect_eq "--output FIFO: still a FIFO" 1 "$([ -p "$TMP/fifo" ] && echo 1)"
"$CNNSCALE_SOURCE/scripts/gpu-kit.sh" --build "$CNNSCALE_BUILD" --output "$TMP/no/such/kit.tar.gz" >"$TMP/nodir.out" 2>&1
expect_eq "--output in a missing folder: exit status 1" 1 "$?"
expect_grep "--output in a missing folder: refused, naming the folder" "^gpu-kit.sh: error: .*its folder $TMP/no/such does not exist" "$TMP/nodir.out"
rm -rf "$TMP/k1" "$TMP/k2" "$TMP/kits"

CACHE=/var/cache/cnnscale/minbase-bookworm.tar
if [ ! -s "$CACHE" ]; then
  command -v debootstrap >/dev/null || { bad "debootstrap installed (scripts/install-deps.sh)"; finish; }
  source "$CNNSCALE_SOURCE/scripts/debian-mirror.sh"
  mirror=$(debian_mirror bookworm 2>"$TMP/mirror.err") || { bad "$(cat "$TMP/mirror.err")"; finish; }
  echo "making the minbase root once (debootstrap from $mirror; cached as $CACHE)"
  mkdir -p "$TMP/mk" /var/cache/cnnscale
  debootstrap --variant=minbase bookworm "$TMP/mk" "$mirror" >"$TMP/debootstrap.log" 2>&1 ||
    { bad "debootstrap --variant=minbase bookworm $TMP/mk $mirror (log:)"; tail -20 "$TMP/debootstrap.log"; finish; }
  tar -C "$TMP/mk" -cf "$CACHE.tmp" . && mv "$CACHE.tmp" "$CACHE"
  rm -rf "$TMP/mk"
fi

# The root lives outside $TMP and is removed only once nothing is mounted under it: lib.sh's
# `rm -rf $TMP` must never reach through a bind mount into /dev or /usr/local/cuda.
R=$(mktemp -d /var/tmp/cnnscale-kit-root.XXXXXX)
MOUNTS=()  # further mount points under $R, unmounted first (last made, first undone)
cleanup() {
  local i
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount "${MOUNTS[$i]}" 2>/dev/null; done
  umount -R "$R/proc" "$R/sys" "$R/dev" "$R/usr/local/cuda" 2>/dev/null
  if findmnt -rn -o TARGET | grep -q "^$R"; then
    echo "gpu_kit: still mounted under $R; left in place" >&2
  else
    rm -rf "$R"
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
tar -C "$R" -xf "$CACHE"

# The root has none of the packages the kit carries libraries of.
for p in openmpi-bin libopenmpi3 libpmix2 libhdf5-103-1 libhdf5-openmpi-103-1 libdnnl3 python3; do
  st=$(chroot "$R" dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
  expect_ne "the minbase root has no $p" "install ok installed" "$st"
done

mkdir -p "$R/usr/local/cuda" "$R/home/user/jobs"
mount --bind /usr/local/cuda "$R/usr/local/cuda" && mount -o remount,bind,ro "$R/usr/local/cuda"
mount -t proc proc "$R/proc"
mount -t sysfs sys "$R/sys"
mount --rbind /dev "$R/dev" && mount --make-rslave "$R/dev"
tar -C "$R/home/user/jobs" -xzf "$TMP/kit.tar.gz"
K=/home/user/jobs/cnnscale-kit
in_root() { chroot "$R" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin bash -c "source $K/kit-env.sh && $1"; }

in_root "$K/kit-check.sh" >"$TMP/check.out" 2>&1
expect_eq "kit-check.sh in the root: every library found" 0 "$?"
grep 'not found' "$TMP/check.out" | head -20
in_root "cnnscale --version" >"$TMP/version.out" 2>&1
expect_eq "cnnscale --version in the root" 0 "$?"
expect_grep "cnnscale --version prints a version" '^cnnscale [0-9]' "$TMP/version.out"
in_root "cnnscale env" >"$TMP/env.out" 2>&1
expect_eq "cnnscale env in the root" 0 "$?"
expect_grep "cnnscale env names why there is no GPU" '^no GPU on rank 0: cudaGetDeviceCount failed: ' "$TMP/env.out"
in_root "cd /tmp && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec -n 2 --oversubscribe --bind-to none cnnscale train --synthetic --max-steps 5 --no-tensorboard --run-dir /tmp/run" \
  >"$TMP/train.out" 2>&1
expect_eq "mpiexec -n 2 cnnscale train in the root" 0 "$?"
expect_grep "2 ranks trained (run.json world_size 2)" '"world_size": *2' "$R/tmp/run/run.json"
[ -s "$R/tmp/run/run.json" ] || tail -20 "$TMP/train.out"

in_root "$K/src/bench/gpu-first-run.sh --out /tmp/first-run --no-pytorch" >"$TMP/first.out" 2>&1
expect_eq "gpu-first-run.sh without a GPU: exit status 4 (no GPU)" 4 "$?"
expect_grep "summary.md says no GPU and why" '^\*\*no GPU: cudaGetDeviceCount failed: ' "$R/tmp/first-run/summary.md"
ntests=$(wc -l <"$R$K/tests.tsv")
nskip=$(grep -c '^test\..*	SKIP	' "$R/tmp/first-run/results.tsv")
expect_eq "every gpu test of the kit ran and SKIPped ($nskip of $ntests)" "$ntests" "$nskip"
expect_eq "the kit lists the gpu tests (at least 10)" 1 "$([ "$ntests" -ge 10 ] && echo 1)"
if grep -qE '	(FAIL|TIMEOUT)' "$R/tmp/first-run/results.tsv"; then
  bad "no check failed without a GPU:"; grep -E '	(FAIL|TIMEOUT)' "$R/tmp/first-run/results.tsv"
else
  ok "no check failed without a GPU"
fi

lib=$(cd "$R$K/lib" && ls libhdf5*.so* 2>/dev/null | head -n 1)
mv "$R$K/lib/$lib" "$R/tmp/"
in_root "$K/kit-check.sh" >"$TMP/check2.out" 2>&1
expect_eq "kit-check.sh fails when a library is missing" 1 "$?"
expect_grep "kit-check.sh names the missing library ($lib)" "needs ${lib//./\\.}: not found" "$TMP/check2.out"
mv "$R/tmp/$lib" "$R$K/lib/"

# Where kit-env.sh finds CUDA's libraries, library by library, as on the H200 node (CUDA
# runtime and cuBLAS in a toolkit, cuDNN and NCCL in a Python environment's nvidia-*
# wheels): here a toolkit folder with only the runtime and cuBLAS ($CUDA_HOME), and
# this machine's CUDA library folder as the wheels' nvidia/cudnn/lib of a "python3"
# that is a stand-in script printing its site-packages folder; /usr/local/cuda gone.
umount "$R/usr/local/cuda"
mkdir -p "$R/opt/cuda-rt/lib64" "$R/opt/pyenv/bin" "$R/opt/pyenv/site/nvidia/cudnn/lib"
for f in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
  touch "$R/opt/cuda-rt/lib64/$f"
  mount --bind "$(readlink -f "/usr/local/cuda/lib64/$f")" "$R/opt/cuda-rt/lib64/$f" && MOUNTS+=("$R/opt/cuda-rt/lib64/$f")
done
mount --bind "$(readlink -f /usr/local/cuda/lib64)" "$R/opt/pyenv/site/nvidia/cudnn/lib" &&
  MOUNTS+=("$R/opt/pyenv/site/nvidia/cudnn/lib")
printf '#!/bin/sh\necho /opt/pyenv/site\n' >"$R/opt/pyenv/bin/python3"
chmod +x "$R/opt/pyenv/bin/python3"
in_root_env() { chroot "$R" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }
in_root_env CUDA_HOME=/opt/cuda-rt CNNSCALE_PYTHON=/opt/pyenv/bin/python3 bash -c \
  "source $K/kit-env.sh && echo \"dirs=\$CNNSCALE_KIT_CUDA_DIRS\" && cnnscale --version" >"$TMP/split.out" 2>&1
expect_eq "kit-env.sh with the libraries split between a toolkit and wheels: cnnscale starts" 0 "$?"
expect_grep "each library from the first folder that has it (toolkit, then the wheels)" \
  '^dirs=/opt/cuda-rt/lib64:/opt/pyenv/site/nvidia/cudnn/lib$' "$TMP/split.out"
in_root_env bash -c "source $K/kit-env.sh; cnnscale --version" >"$TMP/none.out" 2>&1
expect_ne "without CUDA's libraries cnnscale cannot start" 0 "$?"
expect_grep "kit-env.sh names the missing CUDA libraries and CNNSCALE_CUDA_LIBS" \
  'cnnscale-kit: warning: CUDA libraries not found: .*libcudart\.so\.13.*CNNSCALE_CUDA_LIBS' "$TMP/none.out"
in_root_env CNNSCALE_CUDA_LIBS=/opt/pyenv/site/nvidia/cudnn/lib bash -c \
  "source $K/kit-env.sh && echo \"dirs=\$CNNSCALE_KIT_CUDA_DIRS\" && cnnscale --version" >"$TMP/given.out" 2>&1
expect_eq "CNNSCALE_CUDA_LIBS alone is enough" 0 "$?"
expect_grep "CNNSCALE_CUDA_LIBS is used" '^dirs=/opt/pyenv/site/nvidia/cudnn/lib$' "$TMP/given.out"
finish
