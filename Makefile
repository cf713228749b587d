# Prescient's build. `make run` and `make test` are all a new machine needs.
GO       ?= go
BIN      := bin/prescient
VERSION  := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
DATASETS ?= ../shared/datasets
RUN_DIR  := .run
# go-nvml's headers use deprecated declarations; the warnings say nothing about our code.
export CGO_CFLAGS ?= -Wno-deprecated-declarations
# One package's tests may take long on two cores (real servers, trace replays), never forever.
GOTEST_TIMEOUT ?= 40m

.PHONY: build test run bench eval lint fuzz influxdb influxdb-stop clean

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/prescient

# Starts a throw-away InfluxDB 1.8.10 (installing it first if missing), runs every test against it, stops it.
test: lint
	scripts/with-influxdb.sh $(GO) test -timeout $(GOTEST_TIMEOUT) ./...

# The control plane on the embedded default: no GPU, no InfluxDB; state in $(RUN_DIR)/prescient.db.
run: build
	@mkdir -p $(RUN_DIR)
	$(BIN) serve --addr 127.0.0.1:8080 --db $(RUN_DIR)/prescient.db

bench:
	scripts/with-influxdb.sh $(GO) test -run '^$$' -bench . -benchmem -timeout $(GOTEST_TIMEOUT) ./...

# Evaluation reports on the public traces in $(DATASETS): printed, not asserted (make test asserts what it can).
eval: build
	$(BIN) datasets inspect philly:$(DATASETS)/philly/philly_jobs.csv
	$(BIN) datasets inspect openb:$(DATASETS)/alibaba-openb/openb_pod_list_default.csv
	$(BIN) datasets generate --jobs 74167 --seed 1 --out $(RUN_DIR)/synthetic.jsonl.gz
	$(BIN) datasets inspect prescient:$(RUN_DIR)/synthetic.jsonl.gz

lint:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Runs each fuzz target for FUZZTIME (default 30s).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# A local InfluxDB 1.8.10 for trying the collector by hand; `make influxdb-stop` stops it.
influxdb:
	@mkdir -p $(RUN_DIR)
	@if [ -f $(RUN_DIR)/influxdb.dir ]; then echo "already running: $$(cat $$(cat $(RUN_DIR)/influxdb.dir)/env | head -1)"; exit 0; fi; \
	dir="$$(mktemp -d "$${TMPDIR:-/tmp}/prescient-influxdb.XXXXXX")"; \
	url="$$(scripts/influxdb.sh start "$$dir")" && echo "$$dir" > $(RUN_DIR)/influxdb.dir && \
	echo "InfluxDB 1.8.10 at $$url (data in $$dir); stop it with: make influxdb-stop"

influxdb-stop:
	@if [ -f $(RUN_DIR)/influxdb.dir ]; then dir="$$(cat $(RUN_DIR)/influxdb.dir)"; \
	scripts/influxdb.sh stop "$$dir"; rm -rf "$$dir" $(RUN_DIR)/influxdb.dir; echo "stopped"; fi

clean:
	rm -rf bin $(RUN_DIR)
