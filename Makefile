# dse — two commands on a fresh clone:  make study STUDY=llama70b  and  make test
PY      := .venv/bin/python
STUDY   ?= llama70b
CSV     ?= $(if $(wildcard data/validation/calibration.csv),data/validation/calibration.csv,../shared/validation/calibration.csv)
.PHONY: setup test study bench bench-gpu validate dashboard clean

setup: .venv/.installed

.venv/.installed: pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=15 tests    # a file per worker: its jit programs and module fixtures built once; the slowest 15 listed (10 min on 2 cores)

study: setup
	$(PY) -m dse.cli study studies/$(STUDY).toml

bench: setup
	DSE_JAX_CACHE= $(PY) -m dse.cli bench

# the same benchmark on every GPU JAX sees (needs jax[cuda12] in the venv); blocks are
# sharded over the GPUs (dse/sweep/devices.py).  DEVICES=cpu:N runs it on N
# CPU host devices instead (how it was tested: it has not been run on a GPU)
bench-gpu: setup
	DSE_JAX_CACHE= $(PY) -m dse.bench --devices $(or $(DEVICES),all)

validate: setup
	$(PY) -m dse.cli validate $(CSV) --out results/validation

dashboard: setup
	$(PY) -m dse.cli dashboard $(STUDY)

clean:
	rm -rf .venv
