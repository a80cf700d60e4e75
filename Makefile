PY      := .venv/bin/python
STUDY   ?= llama70b
.PHONY: setup test study bench validate dashboard clean

setup: .venv/.installed

.venv/.installed: pyproject.toml
	python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

test: setup
	$(PY) -m pytest -q -n 2 tests 2>/dev/null || $(PY) -m pytest -q tests

study: setup
	$(PY) -m dse.cli study studies/$(STUDY).toml

bench: setup
	$(PY) -m dse.cli bench

validate: setup
	$(PY) -m dse.cli validate ../shared/validation/calibration.csv

dashboard: setup
	$(PY) -m dse.cli dashboard studies/$(STUDY).toml

clean:
	rm -rf .venv results/*/
