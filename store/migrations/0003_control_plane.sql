-- The control plane's state beside the jobs: placements, forecasts, runs.
--
-- Where each running job runs: the attempt the control plane recorded as
-- started and the GPU shares it holds, so that a control plane that
-- restarts knows what runs where without asking anyone. One row per job
-- that is running or checkpointing; the store deletes the row when the job
-- leaves those states. Times are INTEGER nanoseconds since the Unix epoch,
-- UTC; durations nanoseconds.

CREATE TABLE job_placements (
    job_id              TEXT    NOT NULL PRIMARY KEY REFERENCES jobs (id),
    attempt             INTEGER NOT NULL,           -- the job's attempts count when it started
    allocations         TEXT    NOT NULL,           -- JSON [{node, gpu, milli}]
    checkpoint_every_ns INTEGER NOT NULL DEFAULT 0,
    confirmed           INTEGER NOT NULL DEFAULT 0, -- 1 once the backend reported the attempt started
    stop_by             INTEGER,                    -- a preemption's stop time; NULL when none
    stop_reason         TEXT    NOT NULL DEFAULT ''
) STRICT;

-- The duration and memory forecast each job was planned with, kept so that
-- forecasts can be compared with what the jobs took once they end.
CREATE TABLE job_forecasts (
    job_id           TEXT    NOT NULL PRIMARY KEY REFERENCES jobs (id),
    time             INTEGER NOT NULL,
    duration_p50_ns  INTEGER NOT NULL,
    duration_p90_ns  INTEGER NOT NULL,
    memory_p90_bytes INTEGER NOT NULL DEFAULT 0,
    source           TEXT    NOT NULL
) STRICT;

-- What the node agent runs for a job: its argv and added environment, as
-- submitted. Jobs of backends whose pods say it (Kubernetes, the simulated
-- backend) have none.
CREATE TABLE job_runs (
    job_id  TEXT NOT NULL PRIMARY KEY REFERENCES jobs (id),
    command TEXT NOT NULL,  -- JSON array of strings
    env     TEXT            -- JSON object, NULL when none
) STRICT;

-- The dashboard reads the events of a time window.
CREATE INDEX job_events_by_time ON job_events (time, id);
