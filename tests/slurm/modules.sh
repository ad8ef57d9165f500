#!/usr/bin/env bash
# `cmake --install --prefix P` and its modulefiles: `module use P/modulefiles; module
# load cnnscale; cnnscale --version` with Lmod and with Environment Modules (Debian's
# environment-modules conflicts with lmod as a package, so it is unpacked privately
# under the build tree and its modulecmd.tcl run with tclsh), help/whatis, unload
# restoring the environment; then an installed template submitted with a module system
# and no CNNSCALE_BIN, as a user would.
source "$CNNSCALE_SOURCE/tests/slurm/cluster_lib.sh"
P="$WORK/prefix"
cmake --install "$CNNSCALE_BUILD" --prefix "$P" >"$TMP/install.log" 2>&1
expect_eq "cmake --install --prefix P" 0 "$?"
for f in bin/cnnscale share/cnnscale/slurm/PT_CNN_MultiGPU.slurm share/cnnscale/slurm/PT_CNN_MultiNode.slurm \
         share/cnnscale/slurm/CNN_CPU.slurm share/cnnscale/configs/mnist_cnn.ini share/doc/cnnscale/local-slurm.md \
         share/cnnscale/scripts/local-slurm-cluster.sh modulefiles/cnnscale/0.1.0.lua modulefiles/cnnscale/0.1.0; do
  expect_file "installed $f" "$P/$f"
done
expect_grep "Lmod modulefile names the install prefix" "^local prefix = \"$P\"\$" "$P/modulefiles/cnnscale/0.1.0.lua"
expect_grep "Tcl modulefile names the install prefix" "^set prefix \"$P\"\$" "$P/modulefiles/cnnscale/0.1.0"

# probe INIT: in a clean shell, INIT defines `module`; print what loading/unloading does.
probe() {
  env -i PATH=/usr/bin:/bin HOME="$HOME" TERM=dumb bash --norc --noprofile -c "
    $1
    module use '$P/modulefiles'
    echo \"path0=\$PATH\"
    module load cnnscale; echo \"load_rc=\$?\"
    echo \"which=\$(command -v cnnscale)\"
    echo \"version=\$(cnnscale --version 2>&1 | head -n 1)\"
    echo \"home=\${CNNSCALE_HOME-unset}\"
    echo \"templates=\${CNNSCALE_TEMPLATES-unset}\"
    echo \"ntemplates=\$(ls \"\$CNNSCALE_TEMPLATES\"/*.slurm 2>/dev/null | wc -l)\"
    echo \"help=\$(module help cnnscale 2>&1 | grep -c 'data-parallel CNN training')\"
    echo \"show=\$(module show cnnscale 2>&1 | grep -c 'modulefiles/cnnscale/0.1.0.lua')\"
    echo \"whatis=\$(module whatis cnnscale 2>&1 | grep -c 'data-parallel CNN training')\"
    module unload cnnscale
    echo \"path1=\$PATH\"
    echo \"home1=\${CNNSCALE_HOME-unset}\"
    echo \"templates1=\${CNNSCALE_TEMPLATES-unset}\"
  " >"$TMP/probe.txt" 2>&1
}
get() { sed -n "s/^$1=//p" "$TMP/probe.txt" | head -n 1; }
check_modules() { # NAME
  expect_eq "$1: module load exit status" 0 "$(get load_rc)"
  expect_eq "$1: cnnscale on PATH from the install" "$P/bin/cnnscale" "$(get which)"
  expect_grep "$1: cnnscale --version" '^version=cnnscale 0\.1\.0' "$TMP/probe.txt"
  expect_eq "$1: CNNSCALE_HOME" "$P" "$(get home)"
  expect_eq "$1: CNNSCALE_TEMPLATES" "$P/share/cnnscale/slurm" "$(get templates)"
  expect_eq "$1: the three templates are there" 3 "$(get ntemplates)"
  expect_eq "$1: module help says what it is" 1 "$([ "$(get help)" -ge 1 ] && echo 1 || echo 0)"
  expect_eq "$1: module whatis says what it is" 1 "$([ "$(get whatis)" -ge 1 ] && echo 1 || echo 0)"
  expect_eq "$1: unload restores PATH" "$(get path0)" "$(get path1)"
  expect_eq "$1: unload removes CNNSCALE_HOME" unset "$(get home1)"
  expect_eq "$1: unload removes CNNSCALE_TEMPLATES" unset "$(get templates1)"
  [ "$_fail" = 0 ] || sed 's/^/    | /' "$TMP/probe.txt"
}

# --- Lmod (Debian's lmod package)
LMOD_INIT=/usr/share/lmod/lmod/init/bash
if [ -r "$LMOD_INIT" ]; then
  probe ". $LMOD_INIT"
  check_modules Lmod
  expect_eq "Lmod: loads the .lua modulefile" 1 "$(get show)"
else
  bad "Lmod missing ($LMOD_INIT): run scripts/install-deps.sh"
fi

# --- Environment Modules 5 (Debian's environment-modules, unpacked privately from the .deb
# that scripts/install-deps.sh keeps in /var/cache/cnnscale/debs: no network at test time)
EM="$CNNSCALE_BUILD/_deps/environment-modules"
EMCMD="$EM/root/usr/lib/x86_64-linux-gnu/modulecmd.tcl"
EMDEB=$(ls /var/cache/cnnscale/debs/environment-modules_*.deb 2>/dev/null | tail -n 1)
if [ ! -r "$EMCMD" ] && [ -n "$EMDEB" ]; then
  rm -rf "$EM" && mkdir -p "$EM" && dpkg -x "$EMDEB" "$EM/root" >"$TMP/em.log" 2>&1
fi
if [ -r "$EMCMD" ] && command -v tclsh >/dev/null; then
  probe "module() { eval \"\$(tclsh '$EMCMD' bash \"\$@\")\"; }"
  check_modules "Environment Modules"
  env -i PATH=/usr/bin:/bin bash --norc -c "tclsh '$EMCMD' bash --version" >"$TMP/emv.txt" 2>&1
  expect_grep "Environment Modules version" '^Modules Release 5' "$TMP/emv.txt"
elif [ -z "$EMDEB" ]; then
  echo "skip: Environment Modules part: no environment-modules .deb in /var/cache/cnnscale/debs (scripts/install-deps.sh downloads it; it could not here, offline?) — the Lmod part above still ran"
else
  bad "Environment Modules: cannot unpack $EMDEB: $(tail -n 2 "$TMP/em.log" 2>/dev/null)"
fi

# --- the installed template, submitted as a user with Lmod and the module on MODULEPATH
cluster_up
mkdir -p "$WORK/job" && cd "$WORK/job" || exit 1
env -i PATH=/usr/bin:/bin:/usr/sbin:/sbin HOME="$HOME" SLURM_CONF="$SLURM_CONF" bash --norc --noprofile -c "
  . $LMOD_INIT; module use '$P/modulefiles'
  exec sbatch --parsable --wait -N2 --ntasks-per-node=1 --cpus-per-task=1 \
    --export=ALL,CNNSCALE_TRAIN_ARGS='--synthetic --max-steps 4 --batch-size 8' '$P/share/cnnscale/slurm/PT_CNN_MultiNode.slurm'
" >"$TMP/job.txt" 2>&1
rc=$?
JOB=$(tail -n 1 "$TMP/job.txt")
OUT="$WORK/job/PT_CNN_MultiNode-$JOB.out"
expect_file "installed template: job output" "$OUT"
expect_grep "installed template: cnnscale from 'module load cnnscale'" "cnnscale: $P/bin/cnnscale \(from module load cnnscale\)" "$OUT"
expect_grep "installed template: the install's config" "train --config $P/share/cnnscale/configs/mnist_cnn.ini --run-dir $WORK/job/runs/PT_CNN_MultiNode-$JOB " "$OUT"
if train_ready; then
  expect_eq "installed template: sbatch --wait status" 0 "$rc"
  expect_eq "installed template: job state" COMPLETED "$(job_field "$JOB" JobState)"
  expect_file "installed template: run.json" "$WORK/job/runs/PT_CNN_MultiNode-$JOB/run.json"
else
  echo "note: 'cnnscale train' is not in this build: the installed template's training is SKIPPED"
fi
[ "$_fail" = 0 ] || show_out "$OUT"
finish
