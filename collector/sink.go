package collector

import (
	"context"
	"errors"
	"fmt"
)

// Sink is where samples go: InfluxDB or the embedded store. A sink writes
// a batch once; batching, retries and the spool live in Writer.
type Sink interface {
	// Write stores the batch. An error wrapping *RejectedError means the
	// database refused (some of) the samples as malformed and a retry
	// would not help; any other error is taken as passing.
	Write(ctx context.Context, batch []Sample) error
	Close() error
}

// ErrUnauthorized is wrapped by a write the database refused because of the
// token (HTTP 401 or 403). The samples are kept (spooled) until an operator
// fixes the token, and the refusal is logged as an error, not as a passing
// outage.
var ErrUnauthorized = errors.New("the database refuses this token")

// RejectedError is a write the database refused for good: malformed
// points, a field type conflict, a batch too large.
type RejectedError struct {
	// Samples is how many samples were refused, when the database says;
	// otherwise the whole batch.
	Samples int
	Err     error
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("%d samples rejected: %v", e.Samples, e.Err)
}

func (e *RejectedError) Unwrap() error { return e.Err }

// isRejected reports whether err is a permanent refusal, and of how many
// samples.
func isRejected(err error) (int, bool) {
	var re *RejectedError
	if errors.As(err, &re) {
		return re.Samples, true
	}
	return 0, false
}
