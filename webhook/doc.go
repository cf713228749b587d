// Package webhook posts job lifecycle events (submitted, started,
// checkpointed, preempted, finished, failed, cancelled, ...) with the job's
// labels to configured URLs, so that experiment trackers and pipelines can
// follow their jobs. Each body is signed: the header X-Prescient-Signature
// is "sha256=" and the hex HMAC-SHA256 of the body under the hook's secret
// (Sign, Verify).
//
// Notifier implements service.Notifier. Notify never blocks the control
// plane: each hook has a bounded queue and its own sender, which delivers
// in order and retries network errors, 429s and 5xx answers with jittered
// exponential backoff. An event that finds a hook's queue full is dropped,
// counted and logged. A hook may take only some event types and tenants.
//
// With an Outbox (serve passes its store), each event is stored before its
// first attempt and deleted once acknowledged or given up on: events that
// a stop (or a crash) leaves undelivered are sent, with the same ID and
// body, by the next run. A receiver should drop IDs it has seen: a crash
// between its acknowledgement and the deletion sends one event twice.
package webhook
