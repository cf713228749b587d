-- A placement's per-job power cap: the fraction of each GPU's default
-- power limit the node agent sets while the attempt runs (0: uncapped).

ALTER TABLE job_placements ADD COLUMN power_limit_fraction REAL NOT NULL DEFAULT 0;
