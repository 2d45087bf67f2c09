"""Owns: finding the programs the benchmark compares, their versions, and the clean environment children get.

ocivendir's console script and dist build, the real vendir and imgpkg named by VENDIR_BIN / IMGPKG_BIN, skopeo, and
the console script of a pip install of dist/'s wheel (`pip_install`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ocivendir import __version__

ROOT = Path(__file__).resolve().parents[1]
# PYTHONPATH is the benchmark's own import path (bench/run.sh): a call carrying it runs in-process, never served
_SCRUB = ("OCIVENDIR_", "VENDIR_", "IMGPKG_", "REGISTRY_", "PYTHONPATH")


@dataclass
class Tools:
    """The programs found for this run, and why each missing one is missing."""

    ocivendir: Path
    dist: Path | None
    vendir: Path | None
    imgpkg: Path | None
    skopeo: Path | None
    skipped: dict[str, str] = field(default_factory=dict)
    pip_client: Path | None = None  # the console script of dist/'s wheel pip-installed (not editable), if built

    @classmethod
    def find(cls, dist: Path | None = None) -> Tools:
        """Look everything up; a missing comparison tool is recorded as skipped, never an error."""
        console = Path(sys.executable).parent / "ocivendir"
        if not console.exists():
            raise SystemExit(f"ocivendir's console script is missing at {console}: run scripts/bootstrap.sh")
        tools = cls(console, None, None, None, None)
        built = dist or ROOT / "dist" / "ocivendir" / "ocivendir"
        tools.dist = built if built.exists() else None
        if tools.dist is None:
            tools.skipped["dist build"] = f"{built} is not built (scripts/dist.sh builds it)"
        wheel = built.parent.parent / f"ocivendir-{__version__}-py3-none-any.whl"  # dist.sh's, beside the build
        if not wheel.exists():
            tools.skipped["pip install"] = f"no {wheel.name} in {wheel.parent} (scripts/dist.sh builds it)"
        else:
            try:
                tools.pip_client = pip_install(wheel, ROOT / "build" / "bench-pip")
            except OSError as exc:
                tools.skipped["pip install"] = f"installing {wheel.name} failed: {exc}"
            except subprocess.CalledProcessError as exc:
                tools.skipped["pip install"] = f"installing {wheel.name} failed: {exc.stderr.decode(errors='replace')}"
        tools.vendir = tools._from_env("VENDIR_BIN", "real vendir")
        tools.imgpkg = tools._from_env("IMGPKG_BIN", "imgpkg")
        found = shutil.which("skopeo")
        tools.skopeo = Path(found) if found else None
        if found is None:
            tools.skipped["skopeo"] = "skopeo is not installed (scripts/bootstrap.sh installs it)"
        return tools

    def _from_env(self, variable: str, what: str) -> Path | None:
        value = os.environ.get(variable, "")
        if not value:
            self.skipped[what] = f"{variable} is not set"
            return None
        path = Path(value)
        if not os.access(path, os.X_OK):
            self.skipped[what] = f"{variable}={value} is not an executable file"
            return None
        return path

    def versions(self) -> dict[str, str]:
        """Each found tool's version line."""
        found = {"ocivendir": [str(self.ocivendir), "version"], "python": [sys.executable, "--version"]}
        if self.dist:
            found["ocivendir (dist)"] = [str(self.dist), "version"]
        if self.vendir:
            found["vendir"] = [str(self.vendir), "version"]
        if self.imgpkg:
            found["imgpkg"] = [str(self.imgpkg), "version"]
        if self.skopeo:
            found["skopeo"] = [str(self.skopeo), "--version"]
        registry = shutil.which("docker-registry")
        if registry:
            found["docker-registry"] = [registry, "--version"]
        return {name: _first_line(argv) for name, argv in found.items()}


def pip_install(wheel: Path, where: Path) -> Path:
    """A venv at `where` with `wheel` installed by pip as a user's `pip install` does: its `ocivendir` console script.

    Not editable: this project's own venv is (`pip install -e`), and an editable install's build id checks the source
    tree (about 150 stat calls, 0.8 ms of each call through the Python client, `server/build.py`), which a user's
    install does not. Its site-packages holds what a user's would: ocivendir as pip installs it, and its runtime
    dependencies (no extras), linked from this venv (no network, the same versions). Not this venv's whole
    site-packages: the test and bench extras would be more for the build id to look at on every call than a user's
    install holds. Made again only when the wheel, the interpreter or the dependencies changed.
    """
    dependencies = _runtime_dependencies()
    stamp = f"{hashlib.sha256(wheel.read_bytes()).hexdigest()} {sys.version}\n" + "".join(
        f"{dist.metadata['Name']} {dist.version}\n" for dist in dependencies
    )
    script = where / "bin" / "ocivendir"
    if script.exists() and (where / "bench-stamp").exists() and (where / "bench-stamp").read_text() == stamp:
        return script
    shutil.rmtree(where, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True)
    python = where / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    for dist in dependencies:
        if not dist.files:  # nothing to link: the install would miss a module only at its first import
            raise OSError(f"{dist.metadata['Name']} {dist.version} lists no files (no RECORD): cannot link it")
        for name in {file.parts[0] for file in dist.files if file.parts[0] not in {"..", "__pycache__"}}:
            Path(purelib, name).symlink_to(Path(str(dist.locate_file(name))))
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", "--ignore-installed", str(wheel)], check=True, capture_output=True)  # fmt: skip
    if not script.exists():  # pip found the editable install on the path and would install nothing without
        raise OSError(f"pip installed no console script at {script}")  # --ignore-installed
    (where / "bench-stamp").write_text(stamp)
    return script


def _runtime_dependencies() -> list[metadata.Distribution]:
    """What ocivendir needs at run time, as installed here: its requirements without extras, theirs, and so on."""
    found: dict[str, metadata.Distribution] = {}
    wanted = ["ocivendir"]
    while wanted:
        for line in metadata.requires(wanted.pop()) or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            key = canonicalize_name(requirement.name)
            if key not in found:
                found[key] = metadata.distribution(requirement.name)
                wanted.append(requirement.name)
    return sorted(found.values(), key=lambda dist: canonicalize_name(dist.metadata["Name"]))


def _first_line(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60, env=clean_env())
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0] if lines else f"(exit {done.returncode}, no output)"


def clean_env(home: Path | None = None, **extra: str) -> dict[str, str]:
    """The parent environment without any ocivendir/vendir/imgpkg/registry settings or proxies, plus `extra`."""
    keep = {
        k: v for k, v in os.environ.items()
        if not k.startswith(_SCRUB) and k.lower() not in {"http_proxy", "https_proxy", "no_proxy", "all_proxy"}
    }  # fmt: skip
    if home is not None:
        keep["HOME"] = str(home)
        keep["XDG_CACHE_HOME"] = str(home / ".cache")
        keep["XDG_CONFIG_HOME"] = str(home / ".config")
    return {**keep, **extra}


def named_vendir(program: Path, directory: Path) -> Path:
    """A symlink called `vendir` to `program`, as ocivendir is installed in kapp-controller's sidecar."""
    return named(program, directory, "vendir")


def named(program: Path, directory: Path, name: str) -> Path:
    """`program` called `name` (its mode is its argv[0]'s name): itself when so named, else a symlink in `directory`."""
    if program.name == name:
        return program
    directory.mkdir(parents=True, exist_ok=True)
    link = directory / name
    if not link.is_symlink():
        link.symlink_to(program)
    return link
