-- Jobs, their events and the advisor's recommendations.
--
-- Times are INTEGER nanoseconds since the Unix epoch, UTC; NULL where the
-- Go value is the zero time. Durations inside JSON are nanoseconds (_ns).
-- The columns are what queries filter and sort on; the rest of a job is
-- JSON with snake_case keys, decoded by the store's codec.

CREATE TABLE jobs (
    id              TEXT    NOT NULL PRIMARY KEY,
    tenant          TEXT    NOT NULL,
    user            TEXT    NOT NULL,
    name            TEXT    NOT NULL,
    tier            TEXT    NOT NULL,  -- cluster.Tier name: production, standard, ...
    state           TEXT    NOT NULL,  -- cluster.JobState
    submit_time     INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    start_time      INTEGER,
    end_time        INTEGER,
    last_checkpoint TEXT,              -- JSON {time_unix_ns, step, path}
    outcome         TEXT    NOT NULL,  -- JSON {run_time_ns, peak_gpu_memory_bytes, energy_j, exit_code}
    spec            TEXT    NOT NULL   -- JSON: the rest of cluster.JobSpec
) STRICT;

CREATE INDEX jobs_by_submit        ON jobs (submit_time, id);
CREATE INDEX jobs_by_tenant_submit ON jobs (tenant, submit_time, id);
CREATE INDEX jobs_by_state_submit  ON jobs (state, submit_time, id);

CREATE TABLE job_events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id     TEXT    NOT NULL REFERENCES jobs (id),
    time       INTEGER NOT NULL,
    type       TEXT    NOT NULL,  -- store.EventType
    from_state TEXT,              -- NULL for the submitted event
    to_state   TEXT    NOT NULL,
    message    TEXT    NOT NULL DEFAULT '',
    details    TEXT               -- JSON, NULL when there are none
) STRICT;

CREATE INDEX job_events_by_job ON job_events (job_id, id);

CREATE TABLE recommendations (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    time    INTEGER NOT NULL,
    job_id  TEXT    REFERENCES jobs (id),  -- NULL when not about one job
    kind    TEXT    NOT NULL,
    reason  TEXT    NOT NULL,
    details TEXT,                          -- JSON: the plan or what else backs it
    status  TEXT    NOT NULL               -- store.RecommendationStatus
) STRICT;

CREATE INDEX recommendations_by_time ON recommendations (time, id);
CREATE INDEX recommendations_by_job  ON recommendations (job_id);
