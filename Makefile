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

.PHONY: build image test run bench eval lint fuzz influxdb influxdb-stop clean

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/prescient

# Starts a throw-away InfluxDB 1.8.10 (installing it first if missing), runs every test against it, stops it.
# The dashboard's browser tests need Debian's chromium, the metrics test Debian's prometheus, and the Slurm tests
# Debian's Slurm 22.05, munge and MariaDB (each test starts and stops its own): the ensure scripts install them when
# missing; when they cannot, the other tests still run and those tests fail, saying so.
test: lint
	@scripts/ensure-chromium.sh >/dev/null || echo "make test: Chromium could not be installed; the browser tests will fail" >&2
	@scripts/ensure-prometheus.sh >/dev/null || echo "make test: Prometheus could not be installed; the metrics test will fail" >&2
	@scripts/ensure-slurm.sh >/dev/null || echo "make test: Slurm could not be installed; the Slurm tests will fail" >&2
	scripts/with-influxdb.sh $(GO) test -timeout $(GOTEST_TIMEOUT) ./...
	# The Kubernetes backend against a real kube-apiserver and etcd: a module of its own (its first build ~20 min).
	cd test/kubernetes && $(GO) test -timeout $(GOTEST_TIMEOUT) ./...

# The container image deploy/kubernetes runs (needs a container builder; see docs/kubernetes.md).
IMAGE ?= ghcr.io/prescient-sched/prescient:$(VERSION)
image:
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

# The demo on the embedded default: no GPU, no InfluxDB. Four simulated nodes (2 × 8 A100, 2 × 4 A40) with local agents running real
# `prescient workload` processes, a synthetic job stream, models trained at start; state in $(RUN_DIR)/prescient.db,
# the agents' work in $(RUN_DIR)/demo. It prints the dashboard's address and an admin token.
run: build
	@mkdir -p $(RUN_DIR)
	$(BIN) serve --demo --listen 127.0.0.1:8080 --db $(RUN_DIR)/prescient.db

bench:
	scripts/with-influxdb.sh $(GO) test -run '^$$' -bench . -benchmem -timeout $(GOTEST_TIMEOUT) ./...

# Evaluation reports on the public traces in $(DATASETS): printed, not asserted (make test asserts what it can).
PHILLY       := philly:$(DATASETS)/philly/philly_jobs.csv
KTH          := swf:$(DATASETS)/swf/KTH-SP2-1996-2.1-cln.swf.gz
CURIE        := swf:$(DATASETS)/swf/CEA-Curie-2011-2.1-cln.first75.swf.gz
# The submit times at 50% and 75% of each SWF log's jobs (Curie: of its
# shared part): the origins of the time-limit and backfill evaluations.
SWF_WINDOWS  := $(KTH),1997-03-24T14:54:15Z,1997-05-28T16:10:41Z \
                $(KTH),1997-05-28T16:10:41Z, \
                $(CURIE),2012-06-22T13:46:24Z,2012-08-01T16:23:51Z \
                $(CURIE),2012-08-01T16:23:51Z,
SIM_POLICIES := fifo,fifo-strict,sjf-oracle,srtf-oracle,tiresias,easy-backfill,prescient
SIM_WINDOWS  := 2017-10-25,2017-11-10 2017-11-10,2017-11-20 2017-11-20,2017-12-01 2017-11-10,2017-12-01
eval: build
	@mkdir -p $(RUN_DIR)
	$(BIN) datasets inspect philly:$(DATASETS)/philly/philly_jobs.csv
	$(BIN) datasets inspect openb:$(DATASETS)/alibaba-openb/openb_pod_list_default.csv
	$(BIN) datasets generate --jobs 74167 --seed 1 --out $(RUN_DIR)/synthetic.jsonl.gz
	$(BIN) datasets inspect prescient:$(RUN_DIR)/synthetic.jsonl.gz
	rm -rf $(RUN_DIR)/eval-models
	$(BIN) train --target duration --trace philly:$(DATASETS)/philly/philly_jobs.csv --until 2017-11-10 --models $(RUN_DIR)/eval-models
	$(BIN) evaluate --target duration --trace philly:$(DATASETS)/philly/philly_jobs.csv --from 2017-11-10 --models $(RUN_DIR)/eval-models
	@echo "== duration forecasts, rolling-origin backtest: trained at each origin, scored to the next (W1 Oct 25 → Nov 10, W2 → Nov 20, W3 → Dec 1), then Nov 10 → Dec 1"
	$(BIN) evaluate --target duration --trace $(PHILLY) --origins 2017-10-25,2017-11-10,2017-11-20,2017-12-01
	$(BIN) evaluate --target duration --trace $(PHILLY) --origins 2017-11-10,2017-12-01
	$(BIN) train --target memory --trace prescient:$(RUN_DIR)/synthetic.jsonl.gz --models $(RUN_DIR)/eval-models
	$(BIN) evaluate --target memory --series genai-memory:$(DATASETS)/alibaba-genai/pod_gpu_memory_used_bytes_anon.csv.gz
	@echo "== memory refinement, 5-fold cross-validation by container: each scored by one fitted, calibrated and chosen without it"
	$(BIN) evaluate --target memory --series genai-memory:$(DATASETS)/alibaba-genai/pod_gpu_memory_used_bytes_anon.csv.gz --folds 5
	@echo "== idle forecasts: trained on 75% of the series, scored on the 25% held out (philly-nodes: its last 25% of time)"
	rm -rf $(RUN_DIR)/eval-idle-helios $(RUN_DIR)/eval-idle-genai $(RUN_DIR)/eval-idle-philly
	$(BIN) train --target idle --series helios:$(DATASETS)/helios/earth_vc_sequence --models $(RUN_DIR)/eval-idle-helios
	$(BIN) evaluate --target idle --series helios:$(DATASETS)/helios/earth_vc_sequence --models $(RUN_DIR)/eval-idle-helios --from 2020-05-02 --horizon 60m --output json
	$(BIN) train --target idle --series genai:$(DATASETS)/alibaba-genai/pod_gpu_duty_cycle_anon.csv.gz --models $(RUN_DIR)/eval-idle-genai
	$(BIN) evaluate --target idle --series genai:$(DATASETS)/alibaba-genai/pod_gpu_duty_cycle_anon.csv.gz --models $(RUN_DIR)/eval-idle-genai --from 2022-09-11 --horizon 60m --output json
	$(BIN) train --target idle --series philly-nodes:$(DATASETS)/philly/philly_node_sequence.csv --models $(RUN_DIR)/eval-idle-philly
	$(BIN) evaluate --target idle --series philly-nodes:$(DATASETS)/philly/philly_node_sequence.csv --models $(RUN_DIR)/eval-idle-philly --from 2017-11-01 --horizon 60m --output json
	@echo "== time limits on SWF logs (KTH SP2, CEA Curie): trained before each origin, scored to the next (users' limits as \"user\");"
	@echo "   then easy-backfill and headstart-backfill on the log's own machine with users' limits, learned ones and (KTH) true run times; Curie's take minutes"
	for w in $(SWF_WINDOWS); do set -- $$(echo $$w | tr , ' '); \
	  rm -rf $(RUN_DIR)/eval-swf-models; \
	  $(BIN) train --target duration --trace $$1 --until $$2 --models $(RUN_DIR)/eval-swf-models >/dev/null || exit 1; \
	  echo "-- $$1 from $$2 $${3:+until $$3}"; \
	  $(BIN) evaluate --target limit --trace $$1 --from $$2 $${3:+--until $$3} --models $(RUN_DIR)/eval-swf-models || exit 1; \
	  $(BIN) simulate --trace $$1 --fleet $$1 --from $$2 $${3:+--until $$3} --policy easy-backfill,headstart-backfill --estimates user || exit 1; \
	  $(BIN) simulate --trace $$1 --fleet $$1 --from $$2 $${3:+--until $$3} --policy easy-backfill,headstart-backfill --estimates learned --models $(RUN_DIR)/eval-swf-models || exit 1; \
	  case $$1 in *KTH*) \
	    $(BIN) simulate --trace $$1 --fleet $$1 --from $$2 $${3:+--until $$3} --policy easy-backfill --oracle || exit 1;; \
	  esac; \
	done
	@echo "== simulate: Philly from 2017-11-10 on uniform:50x8:V100, every policy (oracle forecasts)"
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy $(SIM_POLICIES) --oracle --plot $(RUN_DIR)/simulate-philly.svg
	@echo "== simulate: deadlines on 30% of jobs at 2x their duration"
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy $(SIM_POLICIES) --oracle --deadlines 0.3:2
	@echo "== simulate: seeded tiers and deadlines"
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy fifo,prescient --oracle --deadlines 0.3:2 --tier-mix production=0.1,standard=0.5,batch=0.25,opportunistic=0.15
	@echo "== simulate: node failures (MTBF 720h per node); fifo checkpoints every 60m, prescient by Young/Daly at most every 20m"
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy fifo --checkpoint fixed:60m --node-mtbf 720h
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy prescient --oracle --node-mtbf 720h
	@echo "== simulate: learned forecasts (the duration model trained above with --until 2017-11-10)"
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy fifo,sjf-oracle,easy-backfill,prescient --models $(RUN_DIR)/eval-models
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy easy-backfill,prescient --models $(RUN_DIR)/eval-models --deadlines 0.3:2
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy prescient --models $(RUN_DIR)/eval-models --node-mtbf 720h
	@echo "== simulate: each window (W1 Oct 25 → Nov 10, W2 → Nov 20, W3 → Dec 1, and Nov 10 → Dec 1) on 40, 50 and 60 8-GPU nodes,"
	@echo "   learned forecasts trained with train --until the window's start; WORST TENANT: the mean wait of the tenant with"
	@echo "   at least 20 jobs that waits most, over the average wait"
	for w in $(SIM_WINDOWS); do from=$${w%,*}; until=$${w#*,}; \
	  rm -rf $(RUN_DIR)/eval-window-models; \
	  $(BIN) train --target duration --trace $(PHILLY) --until $$from --seed 1 --models $(RUN_DIR)/eval-window-models >/dev/null || exit 1; \
	  for f in uniform:40x8:V100 uniform:50x8:V100 uniform:60x8:V100; do \
	    echo "-- $$from → $$until on $$f"; \
	    $(BIN) simulate --trace $(PHILLY) --fleet $$f --from $$from --until $$until --policy prescient,tiresias,sjf-oracle,fifo --models $(RUN_DIR)/eval-window-models || exit 1; \
	  done; \
	done
	@echo "== simulate: the whole Philly table on uniform:75x8 (speed: sim_wall_s per policy)"
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:75x8 --policy $(SIM_POLICIES) --oracle
	@echo "== placement: the FGD fill experiment, openb pods on every 5th openb GPU node (243 nodes, 1,257 GPUs), seed 42"
	for p in prescient fgd best-fit dot-product gpu-packing gpu-clustering random spread; do \
		$(BIN) simulate --trace openb:$(DATASETS)/alibaba-openb/openb_pod_list_default.csv \
			--fleet 'openb:$(DATASETS)/alibaba-openb/openb_node_list_gpu_node.csv?every=5' --experiment fill --placement $$p --seed 42 || exit 1; \
	done
	@echo "== placement: energy with idle nodes parked after 10 minutes, spread against prescient, then with per-job power caps"
	for p in spread prescient; do \
		$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy prescient --oracle --placement $$p --park-idle-after 10m || exit 1; \
	done
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy prescient --oracle --placement prescient --park-idle-after 10m --power-cap-price 10
	@echo "== idle forecasts in use: nodes parked at once when the running jobs' forecast ends and the arrival rate say they are spare"
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy prescient --oracle --placement prescient --park-idle-after 10m --park-forecast
	@echo "== idle forecasts in use: the GenAI containers as an inference pool beside uniform:30x8, its idle nodes lent to training (kept apart, reactive, the idle model trained above, oracle)"
	for l in none recent:30m model:$(RUN_DIR)/eval-idle-genai oracle; do \
		$(BIN) simulate --trace $(PHILLY) --fleet uniform:30x8:V100 --from 2017-11-10 --policy prescient --oracle --inference genai:$(DATASETS)/alibaba-genai/pod_gpu_duty_cycle_anon.csv.gz --lend $$l || exit 1; \
	done
	$(BIN) simulate --trace $(PHILLY) --fleet uniform:30x8:V100 --from 2017-11-10 --policy prescient --oracle --inference genai:$(DATASETS)/alibaba-genai/pod_gpu_duty_cycle_anon.csv.gz --lend model:$(RUN_DIR)/eval-idle-genai --lend-recent 0
	@echo "== placement: a fleet of V100, P100 and K80 nodes with Gavel's speeds, blind and fastest-first"
	$(BIN) simulate --trace $(PHILLY) --fleet yaml:examples/fleet-mixed.yaml --from 2017-11-10 --policy fifo,prescient --oracle --speeds gavel
	$(BIN) simulate --trace $(PHILLY) --fleet yaml:examples/fleet-mixed.yaml --from 2017-11-10 --policy fifo,prescient --oracle --speeds gavel --fastest-first
	@echo "== placement: the same with Gavel's job types drawn for every job (each runs at its type's speed), blind and fastest-first"
	$(BIN) simulate --trace $(PHILLY) --fleet yaml:examples/fleet-mixed.yaml --from 2017-11-10 --policy fifo,prescient --oracle --speeds gavel --job-types gavel
	$(BIN) simulate --trace $(PHILLY) --fleet yaml:examples/fleet-mixed.yaml --from 2017-11-10 --policy fifo,prescient --oracle --speeds gavel --job-types gavel --fastest-first
	@echo "== placement: data locality with 200 datasets of 500 GB and 2 TB node caches, best-fit against prescient"
	for p in best-fit prescient; do \
		$(BIN) simulate --trace $(PHILLY) --fleet uniform:50x8:V100 --from 2017-11-10 --policy prescient --oracle --placement $$p --datasets 200:500GB --data-cache 2TB || exit 1; \
	done

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
