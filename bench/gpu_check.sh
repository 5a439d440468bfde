#!/usr/bin/env bash
# GPU check for Hit Enter, for a machine with CUDA: environment, the inference tests on CUDA, the overhead bench,
# and the load bench (many visitors) on the bundled model and SmolLM2.
#
#   bash bench/gpu_check.sh [overhead.py arguments...]     e.g. --model /path/to/model --tokens 32
#
# Uses .venv when it exists, else creates .venv-gpu (with --system-site-packages, so a CUDA torch already
# installed on the machine is reused when pip cannot reach the index). Everything printed is also written
# to ${OUT:-/tmp}/gpu_check.log, and the benches' figures to ${OUT:-/tmp}/overhead.json and load_<model>.json.
# Exit status: non-zero when the environment has no CUDA or the tests failed; bench times are never judged.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT_DIR="${OUT:-/tmp}"
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu_check.log"

section() { printf '\n===== %s =====\n' "$*"; }

main() {
    section "venv"
    local venv="${VENV:-}"
    if [[ -z "$venv" ]]; then
        if [[ -x .venv/bin/python ]]; then venv=.venv; else venv=.venv-gpu; fi
    fi
    if [[ ! -x "$venv/bin/python" ]]; then
        echo "creating $venv"
        python3 -m venv --system-site-packages "$venv"
    fi
    local py="$venv/bin/python"
    echo "using $py ($("$py" --version 2>&1))"
    if ! "$py" -m pip install -q -r requirements-dev.txt; then
        echo "WARNING: pip install -r requirements-dev.txt failed (offline?); going on with what is installed"
    fi
    "$py" -c "import torch, transformers, tokenizers, pytest" \
        || { echo "ERROR: torch / transformers / tokenizers / pytest are not importable from $py"; return 1; }

    section "nvidia-smi"
    if command -v nvidia-smi >/dev/null; then nvidia-smi; else echo "nvidia-smi: not found"; fi

    section "torch CUDA"
    "$py" - <<'PY'
import torch, transformers
print(f"torch {torch.__version__}  transformers {transformers.__version__}  CUDA build {torch.version.cuda}  cuDNN {torch.backends.cudnn.version()}")
print(f"cuda available: {torch.cuda.is_available()}  devices: {torch.cuda.device_count()}")
if torch.cuda.is_available():
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        print(f"  [{i}] {p.name}  capability {p.major}.{p.minor}  {p.total_memory / 2**30:.1f} GiB  "
              f"bf16 {torch.cuda.is_bf16_supported()}")
PY
    "$py" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" \
        || { echo "ERROR: torch in $py sees no CUDA device (a CPU-only torch? try VENV=.venv-gpu)"; return 1; }

    section "pytest tests/inference (EXPLAINER_DEVICE=cuda)"
    local tests_rc=0
    EXPLAINER_DEVICE=cuda "$py" -m pytest tests/inference -q -x || tests_rc=$?
    if [[ $tests_rc -eq 5 ]]; then
        echo "NOTE: pytest collected no tests in tests/inference"
        tests_rc=0
    elif [[ $tests_rc -ne 0 ]]; then
        echo "FAILED: pytest exited $tests_rc (the bench still runs)"
    fi

    section "bench/overhead.py --device cuda $*"
    "$py" bench/overhead.py --device cuda --json-out "$OUT_DIR/overhead.json" "$@"

    # Many visitors on CUDA (issue 14): the same load bench as on CPU, against a Daphne using the GPU.
    local model
    for model in bundled smollm2-135m-instruct; do
        section "bench/load.py --model $model (EXPLAINER_DEVICE=cuda)"
        EXPLAINER_DEVICE=cuda "$py" bench/load.py --model "$model" --json > "$OUT_DIR/load_$model.json" \
            && "$py" -c "import json, sys; r = json.load(open(sys.argv[1])); [print(x['visitors'], 'visitors:', round(x['tokens_per_s'], 1), 'tok/s,', round(x['tokens_per_s_vs_1'], 2), 'x lone, itl p95/p50', round(x['itl_p95_over_p50'], 2), ', errors', x['errors']) for x in r['runs']]" "$OUT_DIR/load_$model.json" \
            || echo "NOTE: the load bench on $model did not finish (figures only; not judged)"
    done

    section "summary"
    echo "tests: $([[ $tests_rc -eq 0 ]] && echo ok || echo "FAILED ($tests_rc)")"
    echo "log: $LOG   figures: $OUT_DIR/overhead.json, $OUT_DIR/load_*.json"
    return "$tests_rc"
}

main "$@" 2>&1 | tee "$LOG"
