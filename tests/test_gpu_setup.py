"""scripts/gpu_setup.sh --offline on stand-in environments: a venv, a venv of a venv, a python that is no venv.

The stand-in PyTorch is a stub package (``torch/__init__.py`` with ``__version__ = "2.11.0"``), the vLLM
bundle a tiny xz tarball split into parts with SHA256SUMS as shared/offline-vllm/build.sh writes them, and
FlashAttention 4 tiny wheels laid out as the real ones (``flash_attn/cute`` imports ``cutlass``, which only
nvidia-cutlass-dsl's .pth puts on the path), the largest carried in pieces. No network, no GPU.
"""

import base64
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from lab import REPO_ROOT

BASE_PYTHON = Path(getattr(sys, "_base_executable", sys.executable))
CUTLASS_PTH = ("import sys, os, nvidia_cutlass_dsl; "
               "sys.path.insert(0, os.path.join(nvidia_cutlass_dsl.__path__[0], 'dsl_packages'))\n")


def _run(*argv, env=None, cwd=None, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{argv} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def _clean_env(**extra) -> dict:
    """This process's environment without what would leak the test's own Python into the child's."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE")}
    return {**env, **extra}


def _venv(path: Path, base: Path, system_site: bool = False) -> Path:
    _run(base, "-m", "venv", "--without-pip", *(["--system-site-packages"] if system_site else []), path)
    return path / "bin" / "python"


def _purelib(python: Path, env=None) -> Path:
    out = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", env=env or _clean_env())
    return Path(out.stdout.strip())


def _stub_torch(site: Path, where: str) -> None:
    """Just enough of torch for lab.env: a version, torch.version.cuda and torch.cuda.is_available()."""
    (site / "torch" / "cuda").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(
        f'__version__ = "2.11.0"\nSTAND_IN = {where!r}\nfrom . import cuda, version\n', encoding="utf-8")
    (site / "torch" / "version.py").write_text("cuda = None\n", encoding="utf-8")
    (site / "torch" / "cuda" / "__init__.py").write_text("def is_available():\n    return False\n", encoding="utf-8")


def _wheel(folder: Path, dist: str, version: str, files: dict[str, str | bytes]) -> Path:
    """A minimal valid wheel (METADATA, WHEEL, RECORD with hashes) holding ``files``."""
    info = f"{dist}-{version}.dist-info"
    files = {**files, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as whl:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            whl.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        whl.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return path


def _fa4_wheels(folder: Path) -> None:
    """flash-attn-4, nvidia-cutlass-dsl (only its .pth) and -libs-cu13 (the package), the last in two pieces."""
    folder.mkdir()
    _wheel(folder, "flash_attn_4", "4.0.0b36", {"flash_attn/cute/__init__.py": "import cutlass  # noqa\n"})
    _wheel(folder, "nvidia_cutlass_dsl", "4.8.1", {"nvidia_cutlass_dsl_packages.pth": CUTLASS_PTH})
    big = _wheel(folder, "nvidia_cutlass_dsl_libs_cu13", "4.8.1", {
        "nvidia_cutlass_dsl/__init__.py": "",
        "nvidia_cutlass_dsl/dsl_packages/cutlass/__init__.py": "STAND_IN = True\n",
        "nvidia_cutlass_dsl/lib/blob.bin": os.urandom(64 * 1024)})   # incompressible: pieces of real size
    data = big.read_bytes()
    (folder / f"{big.name}.partaa").write_bytes(data[: len(data) // 2])   # as `split -b 46M NAME NAME.part`
    (folder / f"{big.name}.partab").write_bytes(data[len(data) // 2:])
    big.unlink()


def _bundle(folder: Path) -> None:
    """A vLLM bundle as shared/offline-vllm/build.sh writes it: an xz tarball in parts, and SHA256SUMS."""
    folder.mkdir()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        data = b'__version__ = "0.26.0"\n' + b"#" * 3000 + os.urandom(3000).hex().encode()
        member = tarfile.TarInfo("./vllm/__init__.py")
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    blob = buf.getvalue()
    cut = len(blob) // 3 + 1
    lines = []
    for index in range(3):
        part = blob[index * cut:(index + 1) * cut]
        (folder / f"part{index:02d}").write_bytes(part)
        lines.append(f"{hashlib.sha256(part).hexdigest()}  part{index:02d}")
    lines.append(f"{hashlib.sha256(blob).hexdigest()}  bundle.tar.xz")
    (folder / "SHA256SUMS").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _project(folder: Path) -> Path:
    """What gpu_setup.sh needs of this checkout: itself and lab/ (for python -m lab env)."""
    shutil.copytree(REPO_ROOT / "lab", folder / "lab", ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "scripts").mkdir()
    shutil.copy2(REPO_ROOT / "scripts" / "gpu_setup.sh", folder / "scripts" / "gpu_setup.sh")
    return folder


def _setup(project: Path, python: Path, *args, env=None, check=True) -> subprocess.CompletedProcess:
    return _run("bash", project / "scripts" / "gpu_setup.sh", *args,
                env={**(env or _clean_env()), "PYTHON": str(python)}, check=check)


WHAT_VENV_SEES = "import torch, lab, sys; print(torch.STAND_IN, torch.__version__, lab.__file__, sep='\\n')"


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> dict:
    """A torch venv (the H200's /opt/torch/.venv) and a project set up on it with bundle, wheels and FA4."""
    root = tmp_path_factory.mktemp("gpu-setup")
    torch_python = _venv(root / "torch-venv", BASE_PYTHON, system_site=True)   # its base has pip, if any
    _stub_torch(_purelib(torch_python), "torch-venv")
    _bundle(root / "bundle")
    (root / "wheels").mkdir()
    _wheel(root / "wheels", "tinynb", "1.0", {"tinynb/__init__.py": "OK = True\n"})
    for dist in ("jupyterlab", "jupytext"):    # stand-ins: the notebook wheels carry JupyterLab (live_wheels.sh)
        _wheel(root / "wheels", dist, "1.0", {f"{dist}/__init__.py": "STAND_IN = True\n"})
    _fa4_wheels(root / "fa4")
    fa4_before = sorted((p.name, p.stat().st_size) for p in (root / "fa4").iterdir())
    project = _project(root / "project")
    first = _setup(project, torch_python, "--offline", root / "bundle", root / "wheels", "--fa4-wheels", root / "fa4")
    again = _setup(project, torch_python, "--offline", root / "bundle", root / "wheels", "--fa4-wheels", root / "fa4")
    return {"root": root, "torch_python": torch_python, "project": project, "first": first, "again": again,
            "fa4_before": fa4_before}


def test_a_venv_made_from_a_venv_does_not_see_its_torch(stand_ins):
    """The failure this script works around: --system-site-packages means the base's site, not the venv's."""
    plain = _venv(stand_ins["root"] / "plain", stand_ins["torch_python"], system_site=True)
    proc = _run(plain, "-c", "import torch; print(getattr(torch, 'STAND_IN', ''))", env=_clean_env(), check=False)
    assert proc.returncode != 0 or "torch-venv" not in proc.stdout


def test_offline_setup_on_a_venv_sees_its_torch_the_bundle_the_wheels_and_fa4(stand_ins):
    project, out = stand_ins["project"], stand_ins["first"].stdout
    torch_from, version, lab_file = _run(project / ".venv" / "bin" / "python", "-c", WHAT_VENV_SEES,
                                         env=_clean_env(), cwd="/").stdout.split()
    assert (torch_from, version) == ("torch-venv", "2.11.0")
    assert Path(lab_file).resolve() == (project / "lab" / "__init__.py").resolve()
    # python -m lab env, as the script ran it: torch from the venv, vLLM from the bundle, FA4 importable
    assert "torch        2.11.0" in out and "vllm         0.26.0" in out
    assert "fa4          4.0.0b36 (flash_attn.cute imports)" in out
    _run(project / ".venv" / "bin" / "python", "-c", "import tinynb, cutlass; assert cutlass.STAND_IN",
         env=_clean_env(), cwd="/")
    assert sorted((p.name, p.stat().st_size) for p in (stand_ins["root"] / "fa4").iterdir()) == stand_ins["fa4_before"]


def test_offline_setup_runs_again_without_unpacking_again(stand_ins):
    assert "already unpacked" in stand_ins["again"].stdout
    assert "fa4          4.0.0b36" in stand_ins["again"].stdout


def test_the_bundle_sets_vllms_offline_defaults_and_an_exported_value_wins(stand_ins):
    python = stand_ins["project"] / ".venv" / "bin" / "python"
    show = "import os; print(os.environ['VLLM_USE_FLASHINFER_SAMPLER'], os.environ['HF_HUB_OFFLINE'])"
    assert _run(python, "-c", show, env=_clean_env()).stdout.split() == ["0", "1"]
    assert _run(python, "-c", show, env=_clean_env(VLLM_USE_FLASHINFER_SAMPLER="1")).stdout.split() == ["1", "1"]


def test_offline_setup_on_a_venv_of_a_venv(stand_ins, tmp_path):
    """PYTHON is itself a .venv made by this script on the torch venv: the chain is followed, this lab wins."""
    project = _project(tmp_path / "second")
    _setup(project, stand_ins["project"] / ".venv" / "bin" / "python", "--offline", stand_ins["root"] / "bundle")
    torch_from, version, lab_file = _run(project / ".venv" / "bin" / "python", "-c", WHAT_VENV_SEES,
                                         env=_clean_env(), cwd="/").stdout.split()
    assert (torch_from, version) == ("torch-venv", "2.11.0")
    assert Path(lab_file).resolve() == (project / "lab" / "__init__.py").resolve()


def test_offline_setup_on_a_python_that_is_no_venv(stand_ins, tmp_path):
    """A system or conda python: torch in that interpreter's own site (here its user site), seen by .venv."""
    probe = "import site, sys; print(sys.prefix == sys.base_prefix and bool(site.ENABLE_USER_SITE))"
    user_env = _clean_env(PYTHONUSERBASE=str(tmp_path / "userbase"))
    if _run(BASE_PYTHON, "-c", probe, env=user_env).stdout.strip() != "True":
        pytest.skip(f"{BASE_PYTHON} is a venv or has no user site: no stand-in for a system python here")
    user_site = Path(_run(BASE_PYTHON, "-c", "import site; print(site.getusersitepackages())", env=user_env).stdout.strip())
    user_site.mkdir(parents=True)
    _stub_torch(user_site, "system-python")
    project = _project(tmp_path / "project")
    _setup(project, BASE_PYTHON, "--offline", stand_ins["root"] / "bundle", env=user_env)
    # run without PYTHONUSERBASE: .venv keeps seeing that site through its link, not through the variable
    torch_from, version, _ = _run(project / ".venv" / "bin" / "python", "-c", WHAT_VENV_SEES,
                                  env=_clean_env(), cwd="/").stdout.split()
    assert (torch_from, version) == ("system-python", "2.11.0")


def test_a_python_without_torch_is_refused_before_anything_is_made(stand_ins, tmp_path):
    bare = _venv(tmp_path / "bare", BASE_PYTHON)
    project = _project(tmp_path / "project")
    proc = _setup(project, bare, "--offline", stand_ins["root"] / "bundle", check=False)
    assert proc.returncode == 2 and "cannot import torch" in proc.stderr and "set PYTHON" in proc.stderr
    assert not (project / ".venv").exists()


def test_bad_bundles_and_wheel_pieces_are_refused_before_anything_is_made(stand_ins, tmp_path):
    root, python = stand_ins["root"], stand_ins["torch_python"]
    project = _project(tmp_path / "project")
    corrupt = tmp_path / "bundle"
    shutil.copytree(root / "bundle", corrupt)
    (corrupt / "part01").write_bytes(b"not the part")
    proc = _setup(project, python, "--offline", corrupt, check=False)
    assert proc.returncode == 2 and "corrupt bundle parts" in proc.stderr
    cut = tmp_path / "fa4"
    shutil.copytree(root / "fa4", cut)
    next(cut.glob("*.partab")).unlink()   # one piece of the split wheel did not arrive
    proc = _setup(project, python, "--offline", root / "bundle", "--fa4-wheels", cut, check=False)
    assert proc.returncode == 2 and "no intact wheel" in proc.stderr and "libs_cu13" in proc.stderr
    proc = _setup(project, python, "--offline", root / "bundle", "--fa4-wheels", root / "wheels", check=False)
    assert proc.returncode == 2 and "no flash_attn_4" in proc.stderr
    proc = _setup(project, python, "--offline", check=False)
    assert proc.returncode == 2 and "needs the vLLM bundle folder" in proc.stderr
    assert not (project / ".venv").exists()


def test_help_and_unknown_options():
    script = REPO_ROOT / "scripts" / "gpu_setup.sh"
    assert "--fa4-wheels" in _run("bash", script, "--help").stdout
    proc = _run("bash", script, "--frobnicate", check=False)
    assert proc.returncode == 2 and "unknown option --frobnicate" in proc.stderr


def test_check_live_wheels_put_cutlass_dsl_packages_on_the_path(stand_ins, tmp_path):
    """check_live.sh's WHEELS go in with pip --target, which skips nvidia-cutlass-dsl's .pth: it adds that path."""
    wheels = tmp_path / "fa4"
    wheels.mkdir()
    for whl in (stand_ins["root"] / "fa4").glob("*.whl"):
        shutil.copy2(whl, wheels)
    pieces = sorted((stand_ins["root"] / "fa4").glob("*.whl.part*"))
    (wheels / pieces[0].name.rsplit(".part", 1)[0]).write_bytes(b"".join(p.read_bytes() for p in pieces))
    # PYTHON: pip for real; in place of lab.book.live_check, FlashAttention 4's import with the path it was given
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nif [ "$2" = pip ]; then exec {sys.executable} "$@"; fi\n'
                      f'exec {sys.executable} -c "import flash_attn.cute, cutlass; print(cutlass.STAND_IN)"\n')
    python.chmod(0o755)
    env = _clean_env(PYTHON=str(python), WHEELS=str(wheels), WHEELS_TARGET=str(tmp_path / "site"))
    proc = _run("bash", REPO_ROOT / "scripts" / "check_live.sh", "--chapters", "none", env=env)
    assert proc.stdout.splitlines()[-1] == "True"


def test_fa4_without_cutlass_dsls_path_file_fails_the_setup_and_says_why(stand_ins, tmp_path):
    """Without nvidia-cutlass-dsl's .pth nothing puts dsl_packages on the path: cutlass, so FA4, cannot import."""
    fa4 = tmp_path / "fa4"
    shutil.copytree(stand_ins["root"] / "fa4", fa4)
    (fa4 / "nvidia_cutlass_dsl-4.8.1-py3-none-any.whl").unlink()
    project = _project(tmp_path / "project")
    proc = _setup(project, stand_ins["torch_python"], "--offline", stand_ins["root"] / "bundle", "--fa4-wheels", fa4,
                  check=False)
    assert proc.returncode == 1 and "does not import" in proc.stderr
    assert "fa4          - (flash_attn.cute does not import: ModuleNotFoundError: No module named 'cutlass')" in proc.stdout


def test_notebook_wheels_without_jupyterlab_fail_the_setup_and_say_so(stand_ins, tmp_path):
    """Offline, the box must be able to open a chapter (issue 36): a wheels folder that cannot give it JupyterLab
    is an error, not a note at the end."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "tinynb", "1.0", {"tinynb/__init__.py": "OK = True\n"})
    project = _project(tmp_path / "project")
    proc = _setup(project, stand_ins["torch_python"], "--offline", stand_ins["root"] / "bundle", wheels, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (f"error: JupyterLab does not import in .venv after installing {wheels}: "
                                                    "make that folder again with scripts/live_wheels.sh")
