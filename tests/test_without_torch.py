"""The suite without torch installed: the tests that need it skip, nothing else breaks.

torch is hidden from the import system of a child pytest (a ``sitecustomize`` that makes
every finder miss it), so ``importlib.util.find_spec("torch")`` is None and ``import torch``
raises ModuleNotFoundError, as where it was never installed.
"""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO

HIDE_TORCH = '''
import sys


class _Hide:
    def __init__(self, inner):
        self.inner = inner

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            return None
        return self.inner.find_spec(name, path, target)

    def __getattr__(self, attr):
        return getattr(self.inner, attr)


sys.meta_path[:] = [_Hide(f) if hasattr(f, "find_spec") else f for f in sys.meta_path]
'''


def _pytest(tmp_path, *args):
    (tmp_path / "sitecustomize.py").write_text(HIDE_TORCH, encoding="utf-8")
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly",
                           "-p", "no:cacheprovider", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_torch_is_hidden(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(HIDE_TORCH, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    probe = subprocess.run([sys.executable, "-c", "import importlib.util as u; "
                            "print(u.find_spec('torch'))"], env=env, capture_output=True,
                           text=True, check=True)
    assert probe.stdout.strip() == "None"


def test_every_test_module_collects_without_torch(tmp_path):
    result = _pytest(tmp_path, "--collect-only", "-q", "tests")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "error" not in result.stdout.splitlines()[-1]


def test_the_torch_tests_skip_cleanly(tmp_path):
    result = _pytest(tmp_path, "-q", "-rs", "tests/test_fix_helper.py", "tests/test_verify.py",
                     "tests/test_security.py", "-k",
                     "fix_helper or verify or pickled or pinned_on_the_cpu or threads_sharing "
                     "or event_is_recorded")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "could not import 'torch'" in result.stdout
    assert " failed" not in result.stdout and " error" not in result.stdout
