"""torch, diffusers and vLLM-Omni stay optional: `import vaed_client` and
importing the integration modules need none of them, and using an
integration without its package raises ImportError naming what to install.
Each case runs in a child Python where the package is absent or hidden."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHON_DIR

SYSTEM_PYTHON = "/usr/bin/python3"

# Makes `import NAME` fail in the child, as if NAME were not installed.
HIDE = """
import sys
class Hidden:
    def find_spec(self, name, path=None, target=None):
        if name == {name!r} or name.startswith({name!r} + "."):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Hidden())
"""


def run(python: str, code: str) -> subprocess.CompletedProcess:
    env = {"PYTHONPATH": str(PYTHON_DIR), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    print(out.stdout + out.stderr)
    return out


def test_import_vaed_client_and_integrations_without_torch():
    if not Path(SYSTEM_PYTHON).exists():
        pytest.skip(f"{SYSTEM_PYTHON} is absent")
    has_torch = run(SYSTEM_PYTHON, "import torch").returncode == 0
    code = (("" if not has_torch else HIDE.format(name="torch")) +
            "import sys, vaed_client\n"
            "import vaed_client.integrations, vaed_client.integrations.h3_decode\n"
            "import vaed_client.integrations.diffusers, vaed_client.integrations.vllm_omni\n"
            "assert 'torch' not in sys.modules and 'diffusers' not in sys.modules\n"
            "print('imported without torch:', vaed_client.__version__)\n")
    assert run(SYSTEM_PYTHON, code).returncode == 0


def expect_import_error(uses: str, wanted: str) -> str:
    """Code that calls each lambda of the tuple `uses` and requires an
    ImportError whose message holds `wanted` from every one."""
    return f"""
for use in {uses}:
    try:
        use()
    except ImportError as e:
        print("ImportError:", e)
        assert {wanted!r} in str(e), e
    else:
        raise SystemExit("no ImportError")
"""


@pytest.mark.parametrize("hidden", ["diffusers", "torch"])
def test_diffusers_integration_names_what_to_install(hidden):
    code = (HIDE.format(name=hidden) + "import vaed_client.integrations.diffusers as d\n" +
            expect_import_error('(lambda: d.VaedH3DecodeStep, lambda: d.decode_latents('
                                'None, None, latent_space="normalized"))',
                                "pip install diffusers==0.42.1"))
    assert run(sys.executable, code).returncode == 0


def test_vllm_omni_integration_names_what_to_install():
    code = (HIDE.format(name="vllm_omni") + "import vaed_client.integrations.vllm_omni as v\n" +
            expect_import_error("(lambda: v.MiniMaxH3VaedPipeline,)", "pip install vllm-omni"))
    assert run(sys.executable, code).returncode == 0
