#!/usr/bin/env bash
# gpu_first_run_plan.sh — bench/gpu-first-run.sh --plan (no GPU, no kit): the default set
# fits its budget with every check run (none NOT RUN (budget)), in the order of issue 37
# item 6 — the ResNet-50 benchmarks and PyTorch's per precision first, then the tests,
# the batch-norm kernel bench, the variants, the profiles, resnet20, and the compute-sanitizer last and alone with the
# rest of the budget; each check's limit follows --steps; a variant added with --variant
# or CNNSCALE_FIRST_RUN_VARIANTS runs with its environment (and is profiled); a small
# budget marks what does not fit; malformed variants and options are refused (exit 2).
source "$CNNSCALE_SOURCE/tests/lib.sh"
S=$CNNSCALE_SOURCE/bench/gpu-first-run.sh
plan() { env -u CNNSCALE_KIT -u CNNSCALE_FIRST_RUN_VARIANTS bash "$S" --plan "$@"; }
column_of() { awk -v n="$2" -v c="$3" '$1 == n {print $c}' "$1"; }  # FILE CHECK COLUMN

plan >"$TMP/plan.out" 2>&1
expect_eq "--plan exit status" 0 "$?"
order=$(awk 'NR > 1 && $1 ~ /^(bench|test|profile|kernels)\./ {print $1}' "$TMP/plan.out" | tr '\n' ' ')
expect_eq "the default order" "bench.resnet50.bf16 bench.resnet50.tf32 bench.pytorch.bf16 bench.pytorch.tf32 \
bench.resnet50.fp32 bench.pytorch.fp32 test.* kernels.bn bench.resnet50.bf16own bench.resnet50.tf32own \
bench.resnet50.bf16graph bench.resnet50.jpeg bench.resnet50.tf32.hostplane2 profile.resnet50.tf32 profile.resnet50.bf16 profile.resnet50.bf16own profile.resnet50.tf32own \
bench.resnet20.fp32 bench.resnet20.tf32 bench.resnet20.bf16 bench.resnet20.bf16own bench.resnet20.bf16graph test.sanitizer_gpu " "$order"
expect_eq "nothing NOT RUN (budget) by default" 0 "$(grep -c 'NOT RUN' "$TMP/plan.out")"
line=$(tail -n 1 "$TMP/plan.out")
before=$(sed -n 's/^expected before the sanitizer: \([0-9]*\) s of the 540 s budget.*/\1/p' <<<"$line")
san=$(sed -n "s/.*the sanitizer's limit: \([0-9]*\) s.*/\1/p" <<<"$line")
expect_eq "the expected total before the sanitizer leaves the sanitizer its 150 s ($line)" 1 "$([ "${before:-999}" -le 390 ] && echo 1)"
expect_eq "the sanitizer gets the rest of the budget (at least its own 150 s)" 1 "$([ "${san:-0}" -ge 150 ] && echo 1)"
expect_eq "before + sanitizer = the budget" 540 "$((${before:-0} + ${san:-0}))"
expect_eq "the header comment states the same total" 1 "$(grep -c "^#   = ${before:-x} s before the sanitizer" "$S")"
expect_eq "the sanitizer's limit in its row" "${san:-x}" "$(column_of "$TMP/plan.out" test.sanitizer_gpu 2)"
# Every limit covers its expected time; a PyTorch precision is one process of its own.
expect_eq "every limit at least its expected time" "" \
  "$(awk 'NR > 1 && $1 ~ /^(bench|profile)\./ && $2 + 0 < $3 + 0 {print $1}' "$TMP/plan.out")"
expect_grep "PyTorch bf16 runs both formats" '^bench\.pytorch\.bf16 .*--precisions bf16 --formats contiguous,channels_last' "$TMP/plan.out"
expect_grep "PyTorch fp32 runs NCHW only" '^bench\.pytorch\.fp32 .*--precisions fp32 --formats contiguous --steps 40' "$TMP/plan.out"
expect_grep "a variant's environment is shown" '^bench\.resnet50\.bf16graph .*CNNSCALE_GPU_BN=own CNNSCALE_GPU_GRAPH=1 cnnscale train' "$TMP/plan.out"
expect_eq "bf16graph is not profiled (a profile runs without graphs)" 0 "$(grep -c '^profile\.resnet50\.bf16graph ' "$TMP/plan.out")"
expect_grep "resnet20 as CUDA graphs too" '^bench\.resnet20\.bf16graph .*CNNSCALE_GPU_GRAPH=1 cnnscale train --model resnet20 .*--precision bf16' "$TMP/plan.out"
expect_eq "bf16conv only when asked" 0 "$(grep -c '^bench\.resnet50\.bf16conv ' "$TMP/plan.out")"
plan --benches resnet50.bf16conv >"$TMP/conv.out" 2>&1
expect_grep "bf16conv when asked, with its environment" '^bench\.resnet50\.bf16conv .*CNNSCALE_GPU_BF16_STORE=0 cnnscale train' "$TMP/conv.out"
expect_grep "tf32own: the fp32 NHWC store with our batch norm" \
  '^bench\.resnet50\.tf32own .*CNNSCALE_GPU_NHWC_STORE=1 CNNSCALE_GPU_BN=own cnnscale train .*--tf32 on' "$TMP/plan.out"
expect_grep "the batch-norm kernel bench" '^kernels\.bn +150 ' "$TMP/plan.out"
expect_grep "JPEG input: photos made on the node" '^jpeg\.photos .*cnnscale_imagefolder_tool photos' "$TMP/plan.out"
expect_grep "the host data plane's sums, checked" '^allreduce\.hostplane2 .*cnnscale allreduce --device cuda --backend mpi' "$TMP/plan.out"
expect_grep "2 ranks on one GPU over the host data plane" \
  '^bench\.resnet50\.tf32\.hostplane2 .*mpiexec -n 2 cnnscale train --device cuda --backend mpi' "$TMP/plan.out"
expect_grep "JPEG input: a JPEG store" '^jpeg\.prep .*--store jpeg 320' "$TMP/plan.out"
expect_grep "JPEG input: trained with augmentation and bf16own's switches" \
  '^bench\.resnet50\.jpeg .*CNNSCALE_GPU_BN=own cnnscale train --data .*--augment rrc224,hflip .*--precision bf16' "$TMP/plan.out"

# --steps: the limits follow the work (ResNet-50 bf16: 2 × (8 + steps × 0.528 s) + 30).
plan --steps 80 >"$TMP/plan80.out" 2>&1
expect_eq "--steps 80: bf16's limit" $((2 * (8 + 80 * 528 / 1000) + 30)) "$(column_of "$TMP/plan80.out" bench.resnet50.bf16 2)"
expect_eq "--steps 40: bf16's limit" $((2 * (8 + 40 * 528 / 1000) + 30)) "$(column_of "$TMP/plan.out" bench.resnet50.bf16 2)"
expect_eq "--steps 80: PyTorch's limits grow" 1 \
  "$([ "$(column_of "$TMP/plan80.out" bench.pytorch.fp32 2)" -gt "$(column_of "$TMP/plan.out" bench.pytorch.fp32 2)" ] && echo 1)"

# Added variants: --variant and the environment, each benchmarked and profiled with its switches.
plan --variant 'resnet50.bf16big:CNNSCALE_GPU_BN=own:--precision bf16 --batch-size 256' >"$TMP/own.out" 2>&1
expect_eq "--variant: exit status" 0 "$?"
expect_grep "--variant: its benchmark, with its environment" \
  '^bench\.resnet50\.bf16big .*CNNSCALE_GPU_BN=own cnnscale train .*--precision bf16 --batch-size 256 --max-steps 40' "$TMP/own.out"
expect_grep "--variant: its profile" '^profile\.resnet50\.bf16big .*CNNSCALE_GPU_BN=own .*--max-steps 12' "$TMP/own.out"
expect_eq "--variant: after the default variants, before the profiles" \
  "bench.resnet50.bf16graph bench.resnet50.bf16big bench.resnet50.jpeg" \
  "$(awk '$1 ~ /^(bench|profile)\./ {print $1}' "$TMP/own.out" | grep -A2 '^bench.resnet50.bf16graph$' | tr '\n' ' ' | sed 's/ $//')"
CNNSCALE_FIRST_RUN_VARIANTS='resnet50.a:X=1 Y=2:--precision bf16;resnet20.b::--precision fp32' \
  bash "$S" --plan >"$TMP/envv.out" 2>&1
expect_eq "CNNSCALE_FIRST_RUN_VARIANTS: exit status" 0 "$?"
expect_grep "CNNSCALE_FIRST_RUN_VARIANTS: two assignments" '^bench\.resnet50\.a .*X=1 Y=2 cnnscale train' "$TMP/envv.out"
expect_grep "CNNSCALE_FIRST_RUN_VARIANTS: a resnet20 variant with resnet20's shape" \
  '^bench\.resnet20\.b .*--model resnet20 .*--batch-size 256 --precision fp32 --max-steps 60' "$TMP/envv.out"
expect_eq "a resnet20 variant is not profiled" 0 "$(grep -c '^profile\.resnet50\.b ' "$TMP/envv.out")"

# A small budget: what does not fit is NOT RUN (budget), the checks before it run.
plan --budget 100 >"$TMP/small.out" 2>&1
expect_grep "--budget 100: the first checks run" '^bench\.resnet50\.bf16 +88 +29 ' "$TMP/small.out"
expect_grep "--budget 100: the later ones NOT RUN (budget)" '^bench\.resnet20\.bf16 +- +- +NOT RUN \(budget\)' "$TMP/small.out"
expect_eq "--budget 100: the sanitizer too" 1 "$(grep -c '^test\.sanitizer_gpu .*NOT RUN (budget' "$TMP/small.out")"
# 7 minutes (the developers' guide's size of one call): the sanitizer, with under 60 s left,
# is not started (it would be cut mid-run and read as a failure); the default gives its
# runs what is left less 10 s, at most its own 150 s.
plan --budget 420 >"$TMP/seven.out" 2>&1
expect_grep "--budget 420: the sanitizer not started, saying why" \
  '^test\.sanitizer_gpu +- +- +NOT RUN \(budget: [0-9]+ s left, needs 60\)' "$TMP/seven.out"
expect_grep "--budget 420: the checks before it all planned" '^bench\.resnet20\.bf16graph +[0-9]+ +[0-9]+ ' "$TMP/seven.out"
expect_grep "the default: the sanitizer's runs get its limit less 10 s, at most 150" \
  "^test\.sanitizer_gpu +157 +157 .*its runs: 147 s" "$TMP/plan.out"

# --benches picks (old names still work; the tests first and the sanitizer last all the same).
plan --benches resnet50.tf32,pytorch >"$TMP/pick.out" 2>&1
expect_eq "--benches resnet50.tf32,pytorch" "kit-check version env test.* bench.resnet50.tf32 bench.pytorch.fp32 bench.pytorch.tf32 bench.pytorch.bf16 test.sanitizer_gpu" \
  "$(awk 'NR > 1 && $1 ~ /^(bench|test|kit|version|env)/ {print $1}' "$TMP/pick.out" | tr '\n' ' ' | sed 's/ $//')"

# Mistakes: exit 2 with a message naming the form.
for bad in 'resnet50.x' 'vgg.x::--precision bf16' 'resnet50.x:NOT AN ASSIGNMENT:' 'resnet50.bf16::--precision bf16'; do
  plan --variant "$bad" >"$TMP/bad.out" 2>&1
  expect_eq "--variant '$bad': exit status 2" 2 "$?"
  expect_grep "--variant '$bad': says why" "^gpu-first-run.sh: error: variant '" "$TMP/bad.out"
done
plan --benches resnet50.nope >"$TMP/bad.out" 2>&1
expect_eq "--benches with an unknown name: exit status 2" 2 "$?"
expect_grep "--benches with an unknown name: names the known ones" 'unknown benchmark resnet50.nope .*resnet50.bf16conv' "$TMP/bad.out"
bash "$S" --budget x --plan >"$TMP/bad.out" 2>&1
expect_eq "--budget x: exit status 2" 2 "$?"
bash "$S" >"$TMP/bad.out" 2>&1
expect_eq "no --out without --plan: exit status 2" 2 "$?"
expect_grep "no --out: says so" '^gpu-first-run.sh: error: --out DIR is required' "$TMP/bad.out"
bash -n "$S"
expect_eq "bash -n" 0 "$?"
if command -v shellcheck >/dev/null; then
  shellcheck "$S" >"$TMP/sc.out" 2>&1
  expect_eq "shellcheck $(head -c 300 "$TMP/sc.out")" 0 "$?"
fi
finish
