-- Nodes powered down because they ran nothing (control's parking): a row
-- per node while it is parked or being woken, with the node as it was
-- when it parked (JSON of cluster.Node), so that a control plane that
-- restarts while the node is off neither forgets it nor loses what it
-- needs to plan a wake (an agent that is off does not register). Times
-- are INTEGER nanoseconds since the Unix epoch, UTC.

CREATE TABLE parked_nodes (
    node  TEXT    NOT NULL PRIMARY KEY,
    state TEXT    NOT NULL CHECK (state IN ('parked', 'waking')),
    since INTEGER NOT NULL,            -- when it entered the state
    shape TEXT    NOT NULL             -- JSON cluster.Node when it parked
) STRICT;
