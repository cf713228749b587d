// Package firstfit is the simple placement of the executor issue: each task
// of a job goes to the least-loaded ready node (most GPUs wholly free) that
// can hold it, on that node's lowest-numbered free GPUs. A job larger than a
// node is split into whole-node tasks and a remainder; a gang's tasks are
// its GPUs over its gang size. A job starts whole or not at all.
package firstfit
