-- Inference nodes lent to training (control's lending): a row per node
-- that was ever lent, with its state (lent, returning: being taken back,
-- serving: back with inference) since when, and its recent loans, so that
-- a control plane that restarts neither forgets a loan nor takes a node
-- back twice, and reads the node's utilization while on loan as
-- training's. Times are INTEGER nanoseconds since the Unix epoch, UTC.

CREATE TABLE node_loans (
    node  TEXT    NOT NULL PRIMARY KEY,
    pool  TEXT    NOT NULL,            -- the inference pool it belongs to
    state TEXT    NOT NULL CHECK (state IN ('lent', 'returning', 'serving')),
    since INTEGER NOT NULL,            -- when it entered the state
    spans TEXT    NOT NULL             -- JSON [[from, until], ...]: its recent loans, until 0 while open
) STRICT;
