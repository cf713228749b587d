-- GPU telemetry for the embedded default (no InfluxDB): one row per device
-- sample and one per process on a device at a sample's time. The columns
-- are the InfluxDB gpu and gpu_process measurements' fields, with the same
-- names and units. A NULL field was not read. Times are INTEGER
-- nanoseconds since the Unix epoch, UTC. Like InfluxDB, the store keeps one
-- row per device and time: writing a sample again replaces it.

CREATE TABLE gpu_samples (
    gpu_uuid              TEXT    NOT NULL,
    time_ns               INTEGER NOT NULL,
    node                  TEXT    NOT NULL,
    gpu_index             INTEGER NOT NULL,
    model                 TEXT    NOT NULL,
    parent_uuid           TEXT    NOT NULL DEFAULT '',  -- MIG devices: the GPU's UUID
    gpu_instance_id       INTEGER,                      -- MIG devices only
    util_gpu_pct          REAL,
    util_mem_pct          REAL,
    mem_used_bytes        REAL,
    mem_total_bytes       REAL,
    power_w               REAL,
    energy_j              REAL,
    temperature_c         REAL,
    sm_clock_mhz          REAL,
    power_limit_w         REAL,
    throttle_reasons      REAL,
    ecc_corrected_total   REAL,
    ecc_uncorrected_total REAL,
    xid_errors_total      REAL,
    PRIMARY KEY (gpu_uuid, time_ns)
) STRICT, WITHOUT ROWID;

CREATE INDEX gpu_samples_by_time ON gpu_samples (time_ns);

CREATE TABLE gpu_processes (
    gpu_uuid       TEXT    NOT NULL,
    time_ns        INTEGER NOT NULL,
    pid            INTEGER NOT NULL,
    node           TEXT    NOT NULL,
    job_id         TEXT    NOT NULL DEFAULT '',  -- '' when no registry knew the process
    mem_used_bytes INTEGER NOT NULL,
    PRIMARY KEY (gpu_uuid, time_ns, pid)
) STRICT, WITHOUT ROWID;

CREATE INDEX gpu_processes_by_job ON gpu_processes (job_id, time_ns) WHERE job_id <> '';
