# ingestq — run `make help` for the targets.
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
BENCHTIME ?= 3s

.PHONY: help deps build demo demo-cluster test bench bench-fetch bench-ocfl bench-place bench-api bench-cluster fmt

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

deps: ## install ZooKeeper and PostgreSQL (Debian), versitygw (built from the Go proxy) and the OCFL validator (npm) if missing
	./scripts/install-zookeeper.sh
	./scripts/install-postgres.sh
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

bench: ## benchmarks beside their raw-ZooKeeper baselines (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -count 3 ./reactor/queue/

bench-fetch: ## download throughput beside plain io.Copy of the same bytes (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench Download -benchtime 3x -count 3 ./handlers/fetch/

bench-ocfl: ## OCFL store Put on disk and on S3 beside a durable copy and plain S3 PUTs of the same bytes (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench OCFLPut -benchtime 3x -count 3 ./handlers/storage/ocfl/

bench-place: ## S3 place PUTs beside plain minio-go PUTs into the same versitygw (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench S3Put -benchtime 3x -count 3 ./handlers/storage/place/

bench-api: ## the status of a 1,000-job batch beside a raw ZooKeeper read of its nodes; SSE fan-out to 100 clients beside raw NATS (PERFORMANCE.md)
	$(GO) test -run '^$$' -bench . -benchtime 20x -count 3 ./api/

bench-cluster: ## throughput of one host against three, real daemons on a ZooKeeper ensemble, S3 and PostgreSQL (PERFORMANCE.md)
	INGESTQ_TEST_NORACE=1 $(GO) test -run '^$$' -bench Cluster -benchtime 3x ./cmd/ingestq/

fmt: ## gofmt every file
	gofmt -w $$(git ls-files '*.go')
