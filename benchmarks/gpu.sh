#!/usr/bin/env bash
# Issue 20's GPU measurements in one run of a few minutes, BERT-base at seq 128 in bfloat16 on jax
# and on torch: the pretraining step next to keras-hub and transformers on the same GPU, with the
# model FLOPs utilisation and the costliest GPU kernels of each (`python -m benchmarks.pretraining
# --profile_steps`), then the backbone's forward pass and training step next to keras-hub's
# (`python -m benchmarks.backbone`).
#
# For a machine with one NVIDIA GPU, no network, and a Python 3.12 that holds jax, torch and
# transformers but neither TensorFlow nor Keras: bert_keras's models on token ids need no
# TensorFlow, and Keras and keras-hub travel as wheels. First, here: `make gpu-wheels`; then, on
# that machine, from the repository root, with build/gpu-wheels/ copied along:
#
#   bash benchmarks/gpu.sh
#
# Settings (environment): PEAK_TFLOPS, the card's dense bfloat16 peak for the MFU (default 989,
# the H100 SXM's and H200's); BATCH_SIZE (default 128); PRESET (default bert_base); REPEATS
# (default 10); PROFILE_STEPS (default 3; 0: none); BACKENDS (default "jax torch"); BACKBONE
# (default 1; 0 skips that part); PART_SECONDS, each part's time limit (default 240); PYTHON
# (default python3); WHEELS (default build/gpu-wheels). Each part's table and JSON rows go to
# $OUT when set, else to build/gpu/.
set -u
out=${OUT:-build/gpu}
python=${PYTHON:-python3}
site=$(mktemp -d)
mkdir -p "$out"
"$python" -m pip install -q --no-index --no-deps --no-compile --target "$site" \
  "${WHEELS:-build/gpu-wheels}"/*.whl || { echo "no wheels: run 'make gpu-wheels' first, then carry them"; exit 1; }
export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
# jax takes 75% of the GPU's memory at start by default; transformers' torch model shares the card.
export XLA_PYTHON_CLIENT_MEM_FRACTION=0.45
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
  KERAS_BACKEND=jax "$python" -c 'import jax, keras, torch, transformers
print("jax", jax.__version__, jax.devices(), "| torch", torch.__version__, torch.cuda.is_available(),
      "| transformers", transformers.__version__, "| keras", keras.__version__)'
} 2>&1 | tee "$out/versions.txt"
status=0
# run NAME COMMAND...: the command's output to $out/NAME.txt, its rows to $out/NAME.json.
run() {
  local name=$1
  shift
  timeout "${PART_SECONDS:-240}" "$@" --json_output="$out/$name.json" 2>&1 | tee "$out/$name.txt"
  local code=${PIPESTATUS[0]}
  [ "$code" = 0 ] || { echo "$name: exit $code"; status=1; }
}
backends=${BACKENDS:-jax torch}
for backend in $backends; do
  KERAS_BACKEND=$backend run "pretraining_$backend" "$python" -m benchmarks.pretraining \
    --preset="${PRESET:-bert_base}" --sequence_length=128 --batch_size="${BATCH_SIZE:-128}" \
    --mixed_precision=bfloat16 --peak_tflops="${PEAK_TFLOPS:-989}" --repeats="${REPEATS:-10}" \
    --profile_steps="${PROFILE_STEPS:-3}" --profile_dir="$site/profiles"
done
if [ "${BACKBONE:-1}" = 1 ]; then
  run backbone "$python" -m benchmarks.backbone --backends="${backends// /,}" \
    --sizes="${PRESET:-bert_base}" --dtype=mixed_bfloat16 --batch_size="${BATCH_SIZE:-128}" \
    --repeats="${REPEATS:-10}"
fi
exit $status
