# ingestq — run `make help` for the targets.
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
BENCHTIME ?= 3s
# BENCH_SHORT=1 runs every benchmark once in its -short size: a check that
# each still runs (CI), not a measure. Otherwise each target's own settings.
BENCH_SHORT ?=
bench_flags = $(if $(BENCH_SHORT),-short -benchtime 1x -count 1,$(1))

.PHONY: help deps build demo demo-cluster test bench bench-queue bench-reactor bench-watch bench-fetch bench-ingest bench-access bench-ocfl bench-place bench-api bench-audit bench-cluster bench-big bench-window fmt

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

deps: ## install ZooKeeper, PostgreSQL, Chromium and promtool (Debian), versitygw (built from the Go proxy) and the OCFL validator (npm) if missing
	./scripts/install-zookeeper.sh
	./scripts/install-postgres.sh
	./scripts/install-chromium.sh
	./scripts/install-prometheus.sh
	./scripts/install-versitygw.sh
	./scripts/install-ocfl-validator.sh

build: ## build bin/ingestq
	$(GO) build -ldflags "-X github.com/ingestq/ingestq/cmd/ingestq/cli.version=$(VERSION)" -o bin/ingestq ./cmd/ingestq

demo: build ## a sample deposit end to end: local ZooKeeper (installed if missing), the daemon, a web server of testdata/demo
	./scripts/install-zookeeper.sh
	bin/ingestq demo

demo-cluster: build ## the demo with three daemons as three hosts of one cluster, showing which host ran which step
	./scripts/install-zookeeper.sh
	bin/ingestq demo --hosts 3

test: deps ## install what the tests start if missing, then vet and every test with the race detector
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

bench: deps bench-queue bench-reactor bench-watch bench-fetch bench-ingest bench-access bench-ocfl bench-place bench-api bench-audit bench-cluster bench-big bench-window ## install what the benchmarks start if missing, then every measure of PERFORMANCE.md beside its baseline (BENCH_SHORT=1: each once, tiny)

bench-queue: ## queue transitions and lifecycles beside raw multi() (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench . $(call bench_flags,-benchtime $(BENCHTIME) -count 3) ./reactor/queue/

bench-reactor: ## issue 13's measures 1-3: throughput with 1, 2, 3 daemons (each with and without the foreign watch) beside the raw multi() ceiling; dispatch and batch completion beside a bare watch (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench Throughput $(call bench_flags,-benchtime 3x -count 2) ./reactor/
	$(GO) test -run '^$$' -bench Dispatch $(call bench_flags,-benchtime 1000x -count 2) ./reactor/
	$(GO) test -run '^$$' -bench BatchCompletion $(call bench_flags,-benchtime 1000x -count 2) ./reactor/

bench-watch: ## child created → the watcher emits, beside a bare watch (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench CreateToEmit $(call bench_flags,-benchtime 2s -count 2) ./zkwatch/

bench-fetch: ## download throughput beside plain io.Copy of the same bytes (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench Download $(call bench_flags,-benchtime 3x -count 3) ./handlers/fetch/

bench-ingest: ## one object through the whole ingest pipeline beside a durable copy of the same files, pct-of-baseline (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench IngestObject $(call bench_flags,-benchtime 5x -count 3) ./handlers/

bench-access: ## a stored object's whole package through the access queue beside a plain zip of the same stored files, pct-of-baseline (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench AccessPackage $(call bench_flags,-benchtime 5x -count 3) ./handlers/access/

bench-ocfl: ## OCFL store Put on disk and on S3 beside a durable copy and plain S3 PUTs of the same bytes (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench OCFLPut $(call bench_flags,-benchtime 3x -count 3) ./handlers/storage/ocfl/

bench-place: ## S3 place PUTs beside plain minio-go PUTs into the same versitygw (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench S3Put $(call bench_flags,-benchtime 3x -count 3) ./handlers/storage/place/

bench-api: ## the status of a 1,000-job batch beside a raw ZooKeeper read of its nodes; SSE fan-out to 100 clients beside raw NATS (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench . $(call bench_flags,-benchtime 20x -count 3) ./api/

bench-audit: ## an audit of 200 objects in two local OCFL roots, without and with fixity (and record), beside reading and hashing the same content files (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench Audit $(call bench_flags,-benchtime 3x -count 3) ./handlers/audit/

bench-cluster: ## throughput of one host against three, real daemons on a ZooKeeper ensemble, S3 and PostgreSQL (PERFORMANCE.md; left out with BENCH_SHORT)
	$(if $(BENCH_SHORT),@echo "bench-cluster: left out of the short run (real processes on an ensemble)",INGESTQ_TEST_NORACE=1 $(GO) test -run '^$$' -bench Cluster -benchtime 3x ./cmd/ingestq/)

bench-big: ## issue 13's points 4 and 6: a 100,000-object single-file batch manifest rehearsed by a real daemon beside a batch of 1,000, its RSS and heap profile; INGESTQ_BIG_PIPELINE=ingest INGESTQ_BIG_OBJECTS=10000 for the whole pipeline (PERFORMANCE.md; BENCH_SHORT: 6,000 objects)
	INGESTQ_TEST_NORACE=1 $(GO) test -run '^$$' -bench BigBatch $(call bench_flags,-benchtime 1x) -timeout 3h ./cmd/ingestq/

bench-window: ## the operator's window at scale: every API, dashboard and /metrics page of a real daemon on a queue of a 100,000-object windowed batch and 1,000 batches, beside raw ZooKeeper reads of the same nodes; the daemon's RSS; live updates (PERFORMANCE.md; BENCH_SHORT: 10,000 objects, 100 batches)
	INGESTQ_TEST_NORACE=1 $(GO) test -v -run '^$$' -bench WindowAtScale $(call bench_flags,-benchtime 1x) -timeout 1h ./cmd/ingestq/

fmt: ## gofmt every file
	gofmt -w $$(git ls-files '*.go')
