# kafka-replay-audit: every target sets up what it needs from PyPI and Maven Central.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
# Downloaded jars (Kafka broker, Delta through Ivy) live outside the repository.
export KRA_CACHE ?= $(HOME)/.cache/kafka-replay-audit
STAMP := $(VENV)/.installed

.PHONY: setup test unit integration demo bench bench-ingest bench-audit lint kafka-jars broker clean wheel

setup: $(STAMP)

$(STAMP): pyproject.toml setup.py kafka_log_decoder/_native.c conf/constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -e '.[local,dev]' -c conf/constraints.txt
	touch $(STAMP)

# The wheel of the Databricks bundle (databricks.yml): built by the cluster runtime's Python (DBR 17.3
# LTS runs 3.12), since the wheel carries a C extension tagged for the Python that built it.
CLUSTER_PYTHON ?= python3.12
wheel:
	rm -rf dist build && $(CLUSTER_PYTHON) -m pip wheel -q --no-deps --wheel-dir dist .
	ls dist/*.whl

kafka-jars: setup
	$(PY) -m kafka_harness.jars

# The tests run on TEST_WORKERS pytest-xdist workers (one per core), a test file each at a time: each
# worker has its own Spark session, and the real brokers' recordings are made once and shared.
TEST_WORKERS ?= 2
TEST_ARGS := -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --durations=25

test: setup kafka-jars
	$(PY) -m pytest $(TEST_ARGS) tests

unit: setup
	$(PY) -m pytest $(TEST_ARGS) tests/unit

integration: setup kafka-jars
	$(PY) -m pytest $(TEST_ARGS) tests/integration

# The bundled sample: a log directory written by a real Kafka 4.3.1 broker, and its acks ledger.
SAMPLE := samples/broker-4.3.1
DEMO_OUT ?= out/demo

demo: setup
	mkdir -p $(DEMO_OUT)
	$(VENV)/bin/replay-audit dump --summary $(SAMPLE)/idempotent-segments-0 $(SAMPLE)/transactional-0
	$(VENV)/bin/replay-audit run --input sample=$(SAMPLE) --acks $(SAMPLE).acks.jsonl --records \
	    --output $(DEMO_OUT) 2> $(DEMO_OUT).spark.log || (tail -20 $(DEMO_OUT).spark.log; exit 1)
	@grep '^replay-audit:' $(DEMO_OUT).spark.log
	$(PY) -m bench.table_counts $(DEMO_OUT) files batches records producer_snapshots partition_state \
	    txn_index remote_log_metadata quarantine acks sequence_history findings partition_summary runs
	@echo "report: $(DEMO_OUT)/report/index.html, $(DEMO_OUT)/report/findings.json, $(DEMO_OUT)/report/gx/"

bench: setup kafka-jars
	$(PY) -m bench.decode_throughput

# Spark ingestion into Delta on local[2] (issue 3): 1 GB / 4 GB of 500-record batches, 256 MB / 1 GB of 1-record.
bench-ingest: setup
	$(PY) -m bench.ingest_throughput

# The audit stage (history + every rule) on local[2]: 1 GB and 4 GB, uniform and skewed producers,
# cold (a fresh JVM per audit) and warm (one session), about 26 min (issue 4).
bench-audit: setup
	$(PY) -m bench.audit_throughput

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy kafka_log_decoder jobs audit_rules schemas kafka_harness

# A single-node KRaft broker on 127.0.0.1 in the foreground (Ctrl-C stops it).
broker: setup kafka-jars
	$(PY) -m kafka_harness.broker

clean:
	rm -rf build *.egg-info kafka_log_decoder/*.so
