#!/usr/bin/env bash
# Byte-for-byte record of what llmsim prints, to hold a refactor against: every bundled study, estimate
# (table, JSON, CSV; training and inference, --ops), validate --format csv, search, collective, cost, presets.
#
#   benchmarks/golden_outputs.sh DIR          # write one file per command into DIR
#   diff -r BEFORE_DIR AFTER_DIR               # byte-identical, or the rows that changed
#
# Run it on the old commit and on the new one (e.g. from two git worktrees with the same venv) and diff.
set -uo pipefail
out=${1:?usage: golden_outputs.sh OUTPUT_DIR}
mkdir -p "$out"
export COLUMNS=120 NO_COLOR=1 TERM=dumb
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here" || exit 1
llm() { PYTHONPATH="$here" python -c 'import sys; from llmsim.cli import main; sys.argv[0] = "llmsim"; main()' "$@"; }
n=0
run() {  # run NAME ARGS...: stdout, stderr and exit status into DIR/NAME.*
  local name=$1; shift
  llm "$@" >"$out/$name.out" 2>"$out/$name.err"
  echo "$?" >"$out/$name.rc"
  n=$((n + 1))
}

# estimate: training
run est-default estimate
run est-default-json estimate --format json
run est-default-csv estimate --format csv
run est-default-ops estimate --ops
run est-default-ops-csv estimate --ops --format csv
run est-mixtral-ops-csv estimate --model mixtral-8x7b --devices 64 --tp 2 --pp 1 --set parallel.ep=8 \
  --global-batch-size 256 --ops --format csv
run est-8b-zero3 estimate --model llama3-8b --devices 8 --tp 1 --pp 1 --zero-stage 3 --global-batch-size 64 --format csv
run est-vpp-full estimate --set parallel.virtual_stages=2 --set parallel.recompute=full --format json
run est-405b-cp estimate --model llama3-405b --devices 1024 --tp 8 --pp 8 --set parallel.cp=2 --seq-len 16384 \
  --global-batch-size 512 --format json
run est-mixtral estimate --model mixtral-8x7b --devices 64 --tp 2 --pp 1 --set parallel.ep=8 --global-batch-size 256 \
  --format json
run est-dsv3 estimate --model deepseek-v3 --accelerator h800-sxm --network hgx-h800 --devices 2048 --tp 1 --pp 16 \
  --set parallel.ep=64 --global-batch-size 15360 --precision fp8 --format json
run est-gpt3-a100 estimate --model gpt3-175b --accelerator a100-sxm-80gb --network dgx-a100 --devices 1024 --tp 8 \
  --pp 16 --global-batch-size 1536 --seq-len 2048 --format csv
run est-moe-1.8t-gb200 estimate --model gpt-moe-1.8t --accelerator gb200 --network gb200-nvl72 --devices 4096 --tp 4 \
  --pp 32 --set parallel.ep=8 --precision fp4 --global-batch-size 2048 --format json

# estimate: inference
run inf-70b-fp8 estimate --mode inference --model llama3-70b --devices 8 --tp 8 --pp 1 --precision fp8 --batch-size max \
  --input-len 2048 --output-len 512
run inf-70b-fp8-json estimate --mode inference --model llama3-70b --devices 8 --tp 8 --pp 1 --precision fp8 \
  --batch-size max --input-len 2048 --output-len 512 --format json
run inf-7b-a100 estimate --mode inference --model llama2-7b --accelerator a100-sxm-80gb --network dgx-a100 --devices 1 \
  --tp 1 --pp 1 --batch-size 1 --input-len 128 --output-len 128 --format json
run inf-8b-ops estimate --mode inference --model llama3-8b --devices 1 --tp 1 --pp 1 --batch-size 64 --input-len 1024 \
  --output-len 256 --ops
run inf-8b-ops-csv estimate --mode inference --model llama3-8b --devices 1 --tp 1 --pp 1 --batch-size 64 \
  --input-len 1024 --output-len 256 --ops --format csv
run inf-dsv3-ops-csv estimate --mode inference --model deepseek-v3 --accelerator h200-sxm --network dgx-h200 \
  --devices 8 --tp 8 --pp 1 --precision fp8 --batch-size 32 --input-len 4096 --output-len 1024 --ops --format csv
run inf-8b-csv estimate --mode inference --model llama3-8b --devices 1 --tp 1 --pp 1 --batch-size 64 --input-len 1024 \
  --output-len 256 --format csv
run inf-dsv3-mla estimate --mode inference --model deepseek-v3 --accelerator h200-sxm --network dgx-h200 --devices 8 \
  --tp 8 --pp 1 --precision fp8 --batch-size 32 --input-len 4096 --output-len 1024 --format json
run inf-mixtral-ep estimate --mode inference --model mixtral-8x7b --devices 8 --tp 8 --pp 1 --set parallel.ep=8 \
  --batch-size 16 --input-len 1024 --output-len 256 --format json
run inf-405b-pp estimate --mode inference --model llama3-405b --devices 16 --tp 8 --pp 2 --precision fp8 \
  --batch-size 8 --input-len 2048 --output-len 256 --kv-precision fp8 --format json

# validation, search, collectives, cost, presets
run validate-csv validate --format csv
run search-default search --format csv --jobs 1
run search-8b search --model llama3-8b --devices 64 --global-batch-size 256 --top 5 --format csv --jobs 1
for op in all_reduce reduce_scatter all_gather all_to_all broadcast p2p; do
  run "coll-$op-8" collective --op "$op" --bytes 1KiB:1GiB --ranks 8 --format csv
  run "coll-$op-64" collective --op "$op" --bytes 1KiB:1GiB --ranks 64 --format csv
done
run coll-a2a-16-stride collective --op all_to_all --bytes 1GiB --ranks 16 --stride 1 --format json
run coll-ar-nvl72 collective --network gb200-nvl72 --op all_reduce --bytes 1MiB:4GiB --ranks 144 --format csv
run coll-ar-tpu collective --network tpu-v5p-pod --op all_reduce --bytes 1MiB:1GiB --ranks 256 --format csv
run coll-table collective --op all_reduce --bytes 1GiB --ranks 16 --stride 8
for alg in ring tree halving-doubling hierarchical in-network; do
  run "coll-alg-$alg" collective --op all_reduce --bytes 64KiB:1GiB --ranks 32 --algorithm "$alg" --format csv
done
for acc in h100-sxm b200 mi300x gb200 tpu-v5p; do
  run "cost-$acc" cost "$acc" --format csv
done
run cost-h100-table cost h100-sxm
run cost-b200-vol cost b200 --volume 100000 --yield-model murphy --format json
run presets-list presets list
for kind in accelerators models networks; do run "presets-$kind" presets list --kind "$kind"; done
run presets-show presets show h100-sxm
run check-default check llmsim/scenarios/default.yaml

# every bundled study
for spec in sweeps/*.yaml; do
  run "sweep-$(basename "$spec" .yaml)" sweep "$spec" --quiet --jobs 1
done
echo "$n commands recorded in $out"
