-- Inference nodes lent to training (control's lending): a row while a node
-- is lent or being taken back, none while it serves inference, so that a
-- control plane that restarts neither forgets a loan nor takes back a node
-- twice. Times are INTEGER nanoseconds since the Unix epoch, UTC.

CREATE TABLE node_loans (
    node  TEXT    NOT NULL PRIMARY KEY,
    pool  TEXT    NOT NULL,            -- the inference pool it belongs to
    state TEXT    NOT NULL CHECK (state IN ('lent', 'returning')),
    since INTEGER NOT NULL             -- when it entered the state
) STRICT;
