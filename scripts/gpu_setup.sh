#!/usr/bin/env bash
# Set up a machine with an NVIDIA GPU to run the book live: .venv with vLLM 0.26 (and the PyTorch it pins),
# the book's stack, JupyterLab and this project; then print how to open the book. Safe to run again.
#
#   scripts/gpu_setup.sh [--fa4-wheels DIR]                  # with network: pip install -r requirements-gpu.txt
#   scripts/gpu_setup.sh --offline BUNDLE_DIR [WHEELS_DIR] [--fa4-wheels DIR]
#       no network: .venv on the box's own PyTorch 2.11 (from the interpreter that has it: a venv, a conda
#       env or the system python), vLLM from the offline bundle's parts (shared/offline-vllm/build.sh), the
#       notebook stack from WHEELS_DIR (scripts/live_wheels.sh) and FlashAttention 4 from DIR, if given.
#       A wheel carried in pieces (NAME.whl.part00, NAME.whl.part01, ...) is joined by its name first.
#
# PYTHON picks the interpreter (default python3; 3.11 or newer; offline, the one whose `import torch` works).
# Then scripts/check_live.sh executes every chapter live and writes a summary under data/local/live-check/.
set -euo pipefail
export LC_ALL=C   # globs sort bytewise: the pieces of a wheel join in order
cd "$(dirname "$0")/.."
usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "error: $*" >&2; exit 2; }
shopt -s nullglob

offline=""; fa4=""; args=()
while [ $# -gt 0 ]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --offline) offline=1 ;;
        --fa4-wheels) [ $# -ge 2 ] || die "--fa4-wheels needs a folder of FlashAttention 4 wheels"; fa4=$2; shift ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) args+=("$1") ;;
    esac
    shift
done
bundle=${args[0]:-}; wheels=${args[1]:-}
if [ -z "$offline" ]; then
    [ ${#args[@]} -eq 0 ] || die "unexpected argument ${args[0]} (BUNDLE_DIR and WHEELS_DIR go with --offline; see --help)"
else
    [ ${#args[@]} -le 2 ] || die "unexpected argument ${args[2]} (see --help)"
    [ -n "$bundle" ] && [ -f "$bundle/SHA256SUMS" ] \
        || die "--offline needs the vLLM bundle folder (part00, part01, ... and SHA256SUMS from shared/offline-vllm/build.sh)"
fi
py=${PYTHON:-python3}
command -v "$py" >/dev/null || die "no interpreter $py (set PYTHON)"
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "Python 3.11 or newer is needed (found $("$py" --version 2>&1))"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

check_bundle() {
    (cd "$bundle" && grep ' part' SHA256SUMS | sha256sum -c --quiet -) \
        || die "missing or corrupt bundle parts in $bundle: copy them again"
    bundle_sha=$(awk '$2 == "bundle.tar.xz" { print $1 }' "$bundle/SHA256SUMS")
    parts=("$bundle"/part??)
    [ -z "$bundle_sha" ] || [ "$(cat "${parts[@]}" | sha256sum | cut -d' ' -f1)" = "$bundle_sha" ] \
        || die "$bundle: the parts together do not match bundle.tar.xz in SHA256SUMS (a part missing?)"
}

list_wheels() {
    # Write to $2 the wheels of folder $1, one a line: NAME.whl as is, and NAME.whl.part* (one wheel carried in
    # pieces) joined in name order into $work/NAME.whl, checked as a zip (a missing or cut piece fails here).
    local dir=$1 list=$2 piece name
    declare -A seen=()
    : > "$list"
    for w in "$dir"/*.whl; do echo "$w" >> "$list"; done
    for piece in "$dir"/*.whl.part*; do
        name=$(basename "${piece%.part*}")
        [ -z "${seen[$name]:-}" ] && [ ! -f "$dir/$name" ] || continue
        seen[$name]=1
        cat "$dir/$name".part* > "$work/$name"
        "$py" -c 'import sys, zipfile
try:
    sys.exit(zipfile.ZipFile(sys.argv[1]).testzip() is not None)
except (zipfile.BadZipFile, OSError):
    sys.exit(1)' "$work/$name" || die "$dir/$name.part*: the joined pieces are no intact wheel (one missing or cut short? copy them again)"
        echo "$work/$name" >> "$list"
    done
    [ -s "$list" ] || die "$dir holds no .whl files"
}

# Every input is checked before anything is written.
[ -z "$offline" ] || check_bundle
[ -z "$wheels" ] || list_wheels "$wheels" "$work/notebook.list"
if [ -n "$fa4" ]; then
    list_wheels "$fa4" "$work/fa4.list"
    grep -q '/flash_attn_4-[^/]*\.whl$' "$work/fa4.list" || die "--fa4-wheels $fa4 has no flash_attn_4-*.whl (FlashAttention 4's wheel)"
fi
if [ -n "$offline" ]; then
    torch_version=$("$py" -c 'import torch; print(torch.__version__)' 2>&1) \
        || die "$py cannot import torch ($(echo "$torch_version" | tail -1)): set PYTHON to the interpreter that has the box's PyTorch (e.g. PYTHON=/opt/torch/.venv/bin/python3)"
    [ "$("$py" -c 'import os, sys; print(os.path.realpath(sys.prefix))')" != "$(realpath -m .venv)" ] \
        || die "PYTHON=$py is this project's .venv: set PYTHON to the box's own interpreter (the one .venv is built on)"
fi
version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }
if [ -x .venv/bin/python ]; then
    [ "$(version "$py")" = "$(version .venv/bin/python)" ] \
        || die ".venv is Python $(version .venv/bin/python) but $py is $(version "$py"): remove .venv or set PYTHON"
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader \
    || echo "warning: nvidia-smi not found: the chapters will run, but without a GPU they only show cached data" >&2

# The folders on an interpreter's import path, one a line: what it imports from besides PYTHONPATH and here.
path_probe='import os, sys
skip = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
skip.add(os.path.realpath(os.getcwd()))
print("\n".join(dict.fromkeys(os.path.realpath(p) for p in sys.path
                              if p and os.path.isdir(p) and os.path.realpath(p) not in skip)))'

link_torch_env() {
    # The box's PyTorch lives with the interpreter PYTHON names, which may be a venv (the H200's python3 is
    # /opt/torch/.venv/bin/python3), a conda env or the system python. `python -m venv` always builds on the
    # *base* interpreter, so a venv made from a venv sees the base's site-packages (there: no torch, no numpy)
    # even with --system-site-packages. So .venv is made on its own, and one .pth file lists every folder on
    # PYTHON's import path that .venv lacks: its site-packages (purelib and platlib), what its own .pth files
    # add, the system or user site it sees. One mechanism for all three kinds of interpreter; .venv's own
    # packages come first, and nothing is installed into the box's environment (it may be shared or read-only).
    local link="$site/lab-torch-env.pth"
    rm -f "$link"   # .venv's own path, without what an earlier run linked
    awk 'NR == FNR { have[$0] = 1; next } !($0 in have)' \
        <(.venv/bin/python -c "$path_probe") <("$py" -c "$path_probe") > "$link.tmp"
    mv "$link.tmp" "$link"
    echo "    $(wc -l < "$link") folders of $py's import path linked into .venv ($link)"
    .venv/bin/python -c 'import torch' 2>/dev/null || { echo "error: .venv still cannot import torch (see $link)" >&2; exit 1; }
}

unpack_bundle() {
    local stamp=.venv/vllm-site/.bundle-sha256
    if [ -n "$bundle_sha" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$bundle_sha" ]; then
        echo "    already unpacked in .venv/vllm-site"
    else
        rm -rf .venv/vllm-site.partial && mkdir -p .venv/vllm-site.partial
        cat "${parts[@]}" | xz -dc -T0 | tar -xf - -C .venv/vllm-site.partial
        echo "$bundle_sha" > .venv/vllm-site.partial/.bundle-sha256
        rm -rf .venv/vllm-site && mv .venv/vllm-site.partial .venv/vllm-site
    fi
    # First on sys.path, as the bundle expects (it was made for PYTHONPATH); a .pth line starting with import
    # runs. The bundle lacks flashinfer and the box has no network: vLLM's settings for that become defaults
    # of this .venv (an exported value still wins), so no one has to export them before check_live.sh.
    cat > "$site/lab-vllm-site.pth" <<PTH
import os, sys; sys.path.insert(0, '$(pwd)/.venv/vllm-site'); [os.environ.setdefault(k, v) for k, v in (('VLLM_USE_FLASHINFER_SAMPLER', '0'), ('VLLM_NO_USAGE_STATS', '1'), ('HF_HUB_OFFLINE', '1'), ('TRANSFORMERS_OFFLINE', '1'))]
PTH
}

install_wheels() {  # $1: a list from list_wheels; the box's own packages satisfy what they need (--no-deps)
    local files
    mapfile -t files < "$1"
    if ! .venv/bin/python -m pip --version >/dev/null 2>&1; then
        .venv/bin/python -m ensurepip --default-pip >/dev/null || die "no pip for .venv: $py has none and ensurepip failed"
    fi
    # --no-compile: each module is compiled on its first import instead (seconds saved on FA4's CUTLASS DSL)
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-warn-conflicts \
        --no-compile "${files[@]}"
}

if [ -z "$offline" ]; then
    [ -x .venv/bin/python ] || "$py" -m venv .venv
    pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
    echo "[1/3] vLLM 0.26, PyTorch (CUDA) and the book's stack (a few GB the first time) ..."
    "${pip[@]}" -r requirements-gpu.txt
    echo "[2/3] this project ..."
    "${pip[@]}" --no-deps -e .
    if [ -n "$fa4" ]; then echo "      FlashAttention 4 from $fa4 ..."; install_wheels "$work/fa4.list"; fi
    check="[3/3]"
else
    # the box's own PyTorch stays in use (vLLM 0.26 pins torch 2.11, which the offline bundle expects);
    # .venv gets no pip of its own: pip comes from PYTHON's environment, else from ensurepip, when needed
    [ -x .venv/bin/python ] || "$py" -m venv --without-pip .venv
    site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "[1/5] the box's PyTorch $torch_version, from $py ..."
    link_torch_env
    echo "[2/5] vLLM from the offline bundle in $bundle ..."
    unpack_bundle
    if [ -n "$wheels" ]; then echo "[3/5] the notebook stack from $wheels (offline) ..."; install_wheels "$work/notebook.list"; fi
    if [ -n "$fa4" ]; then echo "[4/5] FlashAttention 4 from $fa4 (offline) ..."; install_wheels "$work/fa4.list"; fi
    echo "$(pwd)" > "$site/lab-project.pth"   # the project itself, without a build step (no network)
    check="[5/5]"
fi
echo "$check checking (python -m lab env) ..."
.venv/bin/python -m lab env | tee "$work/env.txt"
if [ -n "$fa4" ] && ! grep -q '^fa4 .* (flash_attn.cute imports)$' "$work/env.txt"; then
    echo "error: FlashAttention 4 was installed from $fa4 but does not import (the fa4 line above says why)" >&2
    exit 1
fi
cat <<MSG

Done. Open the book live (chapters are MyST notebooks; JupyterLab opens them through jupytext):

    .venv/bin/jupyter lab book/

Check every chapter live on this machine (about ten minutes on an H100, at most 31 if every chapter runs to
its limit; no site build needed; summary in data/local/live-check/),
and that JupyterLab opens a chapter and runs its panel (about a minute; data/local/jupyter-check/):

    scripts/check_live.sh
    scripts/check_live.sh --jupyter
MSG
if ! .venv/bin/python -c 'import jupyterlab, jupytext' 2>/dev/null; then
    if [ -n "$wheels" ]; then   # offline, the notebook wheels carry JupyterLab since scripts/live_wheels.sh lists it
        echo "error: JupyterLab does not import in .venv after installing $wheels: make that folder again with scripts/live_wheels.sh" >&2
        exit 1
    fi
    echo "(JupyterLab is not installed: pass WHEELS_DIR, the notebook wheels of scripts/live_wheels.sh, which carry it)"
fi
