#!/usr/bin/env bash
# Makes the Python environment the integration tests run in
# (client/python/tests/test_integrations_*.py): PyPI's diffusers and
# transformers at pinned versions, with every dependency they need pinned
# too, installed --no-deps into a venv layered on vaed's torch venv, so
# torch is not installed twice.
#
#   venv    $VAED_INTEGRATIONS_VENV (default /opt/vaed/integrations-<pins>):
#           a venv of Debian's /usr/bin/python3 (3.11) with
#           --system-site-packages (Debian's numpy 1.24, which vaed_client's
#           extension is built against, and pytest), plus a .pth file that
#           puts the torch venv's site-packages ($VAED_TORCH_VENV, default
#           /opt/vaed/torch-2.11.0, made by scripts/install-deps.sh) on its
#           path.
#   stamp   <venv>/.vaed-pins holds the pins it was made from: a venv whose
#           stamp names the same pins is left as it is (a second run
#           installs nothing); any other is made anew.
#
# Not installed: numpy, Pillow, PyYAML, packaging, Pygments (Debian's copies
# satisfy diffusers' and transformers' requirements; a second numpy would
# not match the one vaed_client's extension was built against). vLLM-Omni is
# not installed: it needs vllm and a torch other than 2.11 (see
# docs/integrations/vllm-omni.md); its tests read its wheel's source instead,
# downloaded into <venv>/wheels here (--no-deps, pinned).
#
# Usage: scripts/integration-env.sh [--print-python | --help]
#   --print-python  make the venv if needed, then print its python3 only
set -euo pipefail
usage="usage: scripts/integration-env.sh [--print-python | --help]"
print_python=0
case "$#:${1:-}" in
  0:) ;;
  1:--print-python) print_python=1 ;;
  1:--help|1:-h) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "$usage" >&2; exit 2 ;;
esac

torch_venv="${VAED_TORCH_VENV:-/opt/vaed/torch-2.11.0}"
torch_site="$torch_venv/lib/python3.11/site-packages"
pins=(
  diffusers==0.42.1 transformers==5.25.0
  huggingface_hub==2.4.0 tokenizers==0.23.3 safetensors==0.8.0 regex==2026.12.2
  importlib_metadata==10.2.0 zipp==4.1.2 lazy-importer==0.1.0 tqdm==4.70.1
  requests==2.34.2 certifi==2026.10.19.post1 charset-normalizer==3.5.3 idna==3.21
  urllib3==2.8.0 hf-xet==1.8.0 httpx2==2.17.0 httpcore2==2.17.0 h11==0.16.0
  anyio==4.16.0 truststore==0.10.5 kernels==0.19.1 typer==0.29.2 click==8.5.1
  shellingham==1.5.4 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2
  annotated-doc==0.0.7 pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0
  typing-inspection==0.4.5 tomlkit==0.15.3
)
wheel_pins=(vllm-omni==0.30.0)
tag=$(printf '%s\n' "${pins[@]}" "${wheel_pins[@]}" | sha256sum | cut -c1-12)
venv="${VAED_INTEGRATIONS_VENV:-/opt/vaed/integrations-$tag}"
stamp="$venv/.vaed-pins"
want=$(printf '%s\n' "$torch_site" "${pins[@]}" "${wheel_pins[@]}")
log() { if [ "$print_python" = 0 ]; then echo "integration-env: $*"; else echo "integration-env: $*" >&2; fi; }

start=$(date +%s%N)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  log "$venv is up to date (${#pins[@]} pinned packages)"
else
  [ -d "$torch_site/torch" ] || { echo "integration-env: no torch in $torch_site (run scripts/install-deps.sh first)" >&2; exit 1; }
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
  echo "$torch_site" > "$venv/lib/python3.11/site-packages/vaed-torch-venv.pth"
  log "installing ${#pins[@]} pinned packages into $venv (--no-deps)"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "${pins[@]}" >&2
  "$venv/bin/pip" download -q --disable-pip-version-check --no-deps -d "$venv/wheels" "${wheel_pins[@]}" >&2
  "$venv/bin/python3" -c "import diffusers, transformers, torch" >&2
  echo "$want" > "$stamp"
fi
ms=$((($(date +%s%N) - start) / 1000000))
log "took $((ms / 1000)).$(printf %03d $((ms % 1000))) s"
if [ "$print_python" = 1 ]; then echo "$venv/bin/python3"; else log "python: $venv/bin/python3"; fi
