// Package webhook posts job lifecycle events (submitted, started,
// checkpointed, preempted, finished, failed, cancelled, ...) with the job's
// labels to configured URLs, so that experiment trackers and pipelines can
// follow their jobs. Each body is signed: the header X-Prescient-Signature
// is "sha256=" and the hex HMAC-SHA256 of the body under the hook's secret
// (Sign, Verify).
//
// Notifier implements service.Notifier. Notify never blocks the control
// plane. Each hook has its own sender, which delivers in order and retries
// network errors, 429s and 5xx answers with jittered exponential backoff,
// and a bound on its undelivered events (Options.QueueSize): an event that
// finds it reached is dropped, counted and logged. A hook may take only
// some event types and tenants.
//
// Without an Outbox each hook's events wait in an in-memory queue and die
// with the process. With an Outbox (serve passes its store) every event is
// stored before its first attempt and deleted once acknowledged or given
// up on, and each sender reads its hook's events from there, waking when
// Notify says there is news and every PollInterval. With a Recorder (the
// same store) the outbox rows of a job event are written in the
// transaction that records the event (Notifier implements
// store.EventOutbox), so an event the store accepted reaches the receiver
// even if the process is killed at once; node events are stored by a
// spool goroutine just after Notify. Events a stop or a crash leaves
// undelivered are sent, with the same ID and body, by the next run. A
// receiver should drop IDs it has seen: a crash between its
// acknowledgement and the deletion sends one event twice.
package webhook
