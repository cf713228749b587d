-- Inference nodes lent to training (control's lending): a row per node
-- that was ever lent, with its state (lent, returning: being taken back,
-- serving: back with inference) since when, and when its last loan
-- began, so that a control plane that restarts neither forgets a loan nor
-- takes a node back twice, and reads the node's utilization during the
-- loan as training's. Times are INTEGER nanoseconds since the Unix epoch,
-- UTC.

CREATE TABLE node_loans (
    node    TEXT    NOT NULL PRIMARY KEY,
    pool    TEXT    NOT NULL,            -- the inference pool it belongs to
    state   TEXT    NOT NULL CHECK (state IN ('lent', 'returning', 'serving')),
    since   INTEGER NOT NULL,            -- when it entered the state
    lent_at INTEGER NOT NULL             -- when its last loan began
) STRICT;
