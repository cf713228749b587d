-- What parking learns, kept across restarts: when a node whose wake
-- failed may be woken again (NULL: at once), and the boots seen, a row per
-- woken node seen down and then up, of which the control plane keeps the
-- latest 64 to learn how long a wake takes. Times are INTEGER nanoseconds
-- since the Unix epoch, UTC; boot_ns is a duration in nanoseconds.

ALTER TABLE parked_nodes ADD COLUMN wake_after INTEGER;

CREATE TABLE node_boots (
    node    TEXT    NOT NULL,
    awake   INTEGER NOT NULL,          -- when it was seen up
    boot_ns INTEGER NOT NULL CHECK (boot_ns > 0)
) STRICT;

CREATE INDEX node_boots_awake ON node_boots (awake);
