# condcli — every target installs what it needs into .venv first (fresh machine: only python3 needed).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test lint bench demo samples clean

install: $(STAMP)

# Re-install whenever the dependency list changes. torch comes from the package registry as resolved by
# pip (DESIGN.md: do not pin the CPU-only torch file, no CPU torchvision works with it).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check condcli tests bench samplegen
	$(BIN)/ruff format --check condcli tests bench samplegen
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python -m bench.bench_spectra
	$(BIN)/python -m bench.bench_spectrum
	$(BIN)/python -m bench.bench_spectrum --early-stop
	$(BIN)/python -m bench.bench_rank_decay
	$(BIN)/python -m bench.bench_long_sequence
	$(BIN)/python -m bench.bench_long_sequence --mix --whole-process
	$(BIN)/python -m bench.bench_monitor
	$(BIN)/python -m bench.bench_gpu
	$(BIN)/python -m bench.bench_embedding_table
	$(BIN)/python -m bench.bench_weights
	$(BIN)/python -m bench.bench_startup

# Rebuild condcli/sample_checkpoints/ (package data: the wheel carries them) from scratch on CPU
# (deterministic; about 13 minutes on 2 cores).
samples: $(STAMP)
	$(BIN)/python -m samplegen.build

# The main job on the embedded default (the shipped sample ViT): the table on stdout; report.json and the
# Figure-1-style plots (spectrum.png, layers.png) and the self-contained report.html in demo-output/.
demo: $(STAMP)
	$(BIN)/condcli spectrum --out demo-output

clean:
	rm -rf $(VENV) demo-output .pytest_cache .mypy_cache .ruff_cache .hypothesis build *.egg-info
