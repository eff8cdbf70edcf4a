#!/usr/bin/env bash
# Issue 20's GPU measurements in one run of a few minutes, BERT-base at seq 128 in bfloat16 on jax
# and on torch:
#   1. the pretraining step next to keras-hub and transformers on the same GPU, timed over `fit`
#      windows as the training programs run, with the model FLOPs utilisation and the costliest
#      GPU kernels of each (`python -m benchmarks.pretraining --timed_steps --profile_steps`);
#   2. ablations of bert_keras alone that explain the gap to the peak: without attention dropout
#      (the fused attention kernel runs), without any dropout, on jax with XLA's Triton GEMM
#      fusions off (cuBLAS for every matmul), and on jax with cuDNN inside XLA's CUDA graphs
#      (attention dropout then leaves cuDNN's kernel); on jax first, whether the padding-masked
#      attention compiles into cuDNN's fused kernel; on torch, the step under `torch.compile`
#      (Keras' jit_compile=True), whose first steps compile for minutes;
#   3. the backbone's forward pass and training step next to keras-hub's (`benchmarks.backbone`).
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
# (default 6); TIMED_STEPS, steps per timing (default 10); PROFILE_STEPS, timings profiled
# (default 1; 0: none); BACKENDS (default "jax torch"); ABLATIONS (default "attention_dropout
# dropout cublas cudnn_in_cuda_graphs torch_compile"; empty: none); BACKBONE (default 1; 0 skips it);
# PART_SECONDS, each run's time limit (default 240); TOTAL_SECONDS, the whole script's
# (default 540: a run gets what is left, and none starts on under 30 s); PYTHON (default
# python3); WHEELS (default build/gpu-wheels). Tables go to $OUT when set, else to build/gpu/:
# NAME.txt per part (the ablations of a backend in one), and JSON rows of parts 1 and 3.
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
# cuDNN outside XLA's CUDA graphs: attention dropout then runs inside cuDNN's attention kernel.
cudnn_outside=--xla_gpu_enable_command_buffer=-CUDNN
export XLA_FLAGS="$cudnn_outside"
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
  KERAS_BACKEND=jax "$python" -c 'import jax, keras, torch, transformers
print("jax", jax.__version__, jax.devices(), "| torch", torch.__version__, torch.cuda.is_available(),
      "| transformers", transformers.__version__, "| keras", keras.__version__)'
} 2>&1 | tee "$out/versions.txt"
status=0
deadline=$(( $(date +%s) + ${TOTAL_SECONDS:-540} ))
# run TEXT JSON COMMAND...: the command's output appended to TEXT, its rows to JSON.
run() {
  local text=$1 json=$2 left=$(( deadline - $(date +%s) ))
  shift 2
  [ "$left" -ge 30 ] || { echo "$text: skipped, ${left} s left of TOTAL_SECONDS" | tee -a "$text"; status=1; return; }
  [ "$left" -le "${PART_SECONDS:-240}" ] || left=${PART_SECONDS:-240}
  timeout "$left" "$@" --json_output="$json" 2>&1 | grep -v '^[IW][0-9]\{4\} ' | tee -a "$text"
  local code=${PIPESTATUS[0]}
  [ "$code" = 0 ] || { echo "$text: exit $code" | tee -a "$text"; status=1; }
}
pretraining=("$python" -m benchmarks.pretraining --preset="${PRESET:-bert_base}"
  --sequence_length=128 --batch_size="${BATCH_SIZE:-128}" --mixed_precision=bfloat16
  --peak_tflops="${PEAK_TFLOPS:-989}" --repeats="${REPEATS:-6}" --timed_steps="${TIMED_STEPS:-10}"
  --profile_dir="$site/profiles")
backends=${BACKENDS:-jax torch}
if [[ " $backends " == *" jax "* ]]; then
  # Whether XLA compiled BERT's padding-masked attention into cuDNN's fused kernel, and how far its
  # bfloat16 output is from float32 attention without it.
  KERAS_BACKEND=jax timeout 120 "$python" - <<'EOF' 2>&1 | grep -v '^[IWE][0-9]\{4\} ' | tee "$out/attention_jax.txt"
import jax
import numpy as np

from bert_keras.layers.multi_head_self_attention import MultiHeadSelfAttention

inputs = np.random.default_rng(0).normal(size=(8, 128, 768)).astype("float32")
lengths = np.array([128, 100, 64, 17, 128, 5, 90, 128])
mask = (np.arange(128) < lengths[:, None])[:, None, None, :]
fused = MultiHeadSelfAttention(num_heads=12, dtype="mixed_bfloat16")
reference = MultiHeadSelfAttention(num_heads=12)
fused(inputs, attention_mask=mask), reference(inputs, attention_mask=mask)
reference.set_weights(fused.get_weights())
step = jax.jit(lambda x, m: fused(x, attention_mask=m))
hlo = step.lower(inputs, mask).compile().as_text().lower()
print("cuDNN fused attention in the compiled layer:", "cudnn" in hlo and "fmha" in hlo)
difference = np.abs(np.asarray(step(inputs, mask), "float32") - np.asarray(reference(inputs, mask)))
print(f"bfloat16 fused vs float32: max |difference| {difference.max():.4f}, mean {difference.mean():.5f}")
EOF
fi
for backend in $backends; do
  KERAS_BACKEND=$backend run "$out/pretraining_$backend.txt" "$out/pretraining_$backend.json" \
    "${pretraining[@]}" --profile_steps="${PROFILE_STEPS:-1}" --profile_rows=30
done
for backend in $backends; do
  text=$out/ablations_$backend.txt
  for ablation in ${ABLATIONS-attention_dropout dropout cublas cudnn_in_cuda_graphs torch_compile}; do
    case $backend/$ablation in
      torch/attention_dropout | torch/cublas) continue ;;  # torch's fused kernel drops itself
      */cublas) flags=() xla="$cudnn_outside --xla_gpu_enable_triton_gemm=false" ;;
      torch/cudnn_in_cuda_graphs | jax/torch_compile) continue ;;
      torch/torch_compile) flags=(--jit_compile) xla= ;;
      */cudnn_in_cuda_graphs) flags=() xla= ;;
      *) flags=("--$ablation=0") xla=$cudnn_outside ;;
    esac
    echo "ablation $ablation:" | tee -a "$text"
    KERAS_BACKEND=$backend XLA_FLAGS=$xla run "$text" "$site/ablation.json" \
      "${pretraining[@]}" --skip=keras_hub,transformers "${flags[@]}"
  done
done
if [ "${BACKBONE:-1}" = 1 ]; then
  run "$out/backbone.txt" "$out/backbone.json" "$python" -m benchmarks.backbone \
    --backends="${backends// /,}" --sizes="${PRESET:-bert_base}" --dtype=mixed_bfloat16 \
    --batch_size="${BATCH_SIZE:-128}" --repeats="${REPEATS:-6}"
fi
exit $status
