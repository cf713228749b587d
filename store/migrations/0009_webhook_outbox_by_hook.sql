-- Each webhook's sender reads its own deliveries from the outbox, oldest
-- first, and the store writes the deliveries of a job event in the
-- transaction that records the event: this index serves the sender's read
-- (WHERE hook = ? ORDER BY seq) and the per-hook counts.

CREATE INDEX webhook_outbox_hook_seq ON webhook_outbox (hook, seq);
