"""Record what the CUDA driver reports about each visible GPU (SMs, L2 size, shared memory, device memory).

Datasheets leave some of these out (NVIDIA publishes no separate L2 size for the H200), so the book takes
them from the machine itself: ``torch.cuda.get_device_properties`` reads the driver's ``cudaDeviceProp``.

    python -m lab device-properties --out data/local/device-properties

Writes ``properties.json`` (one object per GPU) and ``provenance.json``.
"""

from __future__ import annotations

from pathlib import Path

from lab import LabError, store
from lab.cli import path_arg
from lab.folders import writes_folder
from lab.store import LOCAL_DIR

DEFAULT_OUT = LOCAL_DIR / "device-properties"
#: cudaDeviceProp fields as torch names them -> the name written to properties.json
FIELDS = {
    "name": "name",
    "major": "cc_major",
    "minor": "cc_minor",
    "multi_processor_count": "sm_count",
    "L2_cache_size": "l2_bytes",
    "total_memory": "memory_bytes",
    "shared_memory_per_multiprocessor": "smem_per_sm_bytes",
    "shared_memory_per_block_optin": "smem_per_block_optin_bytes",
    "regs_per_multiprocessor": "registers_per_sm",
    "warp_size": "warp_size",
}


def read_properties(torch_cuda) -> list[dict]:
    """One dict per visible GPU with the :data:`FIELDS` the driver reports (a field it lacks is None)."""
    out = []
    for index in range(torch_cuda.device_count()):
        props = torch_cuda.get_device_properties(index)
        out.append({"index": index, **{ours: getattr(props, theirs, None) for theirs, ours in FIELDS.items()}})
    return out


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=path_arg, default=DEFAULT_OUT, help="output folder (default data/local/device-properties)")


@writes_folder("--out", kinds=("hardware",))
def main(args) -> int:
    import torch

    if not torch.cuda.is_available():
        raise LabError("no CUDA GPU here: device-properties reads what the CUDA driver reports about a GPU")
    gpus = read_properties(torch.cuda)
    out = args.out if args.out.is_absolute() else Path.cwd() / args.out
    out.mkdir(parents=True, exist_ok=True)
    store.write_json_atomic(out / "properties.json", {"gpus": gpus})
    store.write_provenance(out, store.new_provenance(
        "hardware", flags={"source": "torch.cuda.get_device_properties (the driver's cudaDeviceProp)"}))
    for gpu in gpus:
        print(f"GPU {gpu['index']}: {gpu['name']}, sm_{gpu['cc_major']}{gpu['cc_minor']}, {gpu['sm_count']} SMs, "
              f"L2 {gpu['l2_bytes'] / 2**20:.0f} MiB, {gpu['memory_bytes'] / 2**30:.1f} GiB")
    print(f"wrote {out}")
    return 0
