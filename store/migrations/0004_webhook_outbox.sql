-- Lifecycle events on their way to a webhook: a row is written before the
-- first attempt and deleted once the receiver acknowledged the event or the
-- notifier gave up on it, so that a control plane that stops (or dies)
-- while a receiver is down sends the event when it starts again. Times are
-- INTEGER nanoseconds since the Unix epoch, UTC.

CREATE TABLE webhook_outbox (
    seq     INTEGER NOT NULL PRIMARY KEY, -- the order events were written in
    hook    TEXT    NOT NULL,             -- the hook's name
    id      TEXT    NOT NULL,             -- the delivery's ID (the body's id)
    body    TEXT    NOT NULL,             -- the signed JSON body, as sent
    created INTEGER NOT NULL,
    UNIQUE (hook, id)
) STRICT;
