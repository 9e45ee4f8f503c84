#!/usr/bin/env bash
# The snip_torch bridge on a CUDA GPU with PyTorch 2.x (and transformers, when installed):
#   tests/test_device.py on SNIP_TORCH_DEVICE=cuda — fake quantization bit-identical to the CPU
#   for every recipe, precision, GEMM role and operand; a planned Llama of the `small` shape
#   (transformers' LlamaForCausalLM when installed) training alike on GPU and CPU; collect_stats
#   agreeing with the CPU's round; one DDP step of two ranks;
#   the torchao example applying an exported plan (when torchao is installed);
#   then every other module of tests/ on this PyTorch (those that need the C++ `snip` skip
#   themselves when it is not built: set SNIP_BIN to a built one to include them).
# Usage: bash integrations/pytorch/gpu_check.sh [python]   (about a minute on one H100-class GPU)
# Prints the versions and the GPU first, so a run's output is its own record.
set -euo pipefail
cd "$(dirname "$0")"
py="${1:-python3}"
"$py" - <<'PY'
import platform, torch
print("python", platform.python_version(), "| torch", torch.__version__, "| cuda", torch.version.cuda)
if not torch.cuda.is_available():
    raise SystemExit("gpu_check: no CUDA device visible to torch; nothing to check")
print("gpu", torch.cuda.get_device_name(0))
try:
    import transformers
    print("transformers", transformers.__version__)
except ImportError:
    print("transformers not installed: the Llama is snip_torch's own (same module names)")
PY
SNIP_TORCH_DEVICE=cuda timeout 300 "$py" -m unittest -v tests.test_device
timeout 600 "$py" -m unittest -v tests.test_plan tests.test_stats tests.test_parity tests.test_agreement \
  tests.test_replan tests.test_distributed
echo "gpu_check: passed"
