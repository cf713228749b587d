package easybackfill

import (
	"github.com/prescient-sched/prescient/executor"
)

// Name is the reserver's name.
const Name = "easy-backfill"

// EASY is the reserver.
type EASY struct{}

var _ executor.Reserver = (*EASY)(nil)

// New returns the reserver.
func New() *EASY { return &EASY{} }

// Reserve implements executor.Reserver: only the first blocked job.
func (*EASY) Reserve(_ *executor.JobView, reserved int, _ *executor.OrderContext) (bool, string) {
	return reserved == 0, "first blocked job (EASY)"
}
