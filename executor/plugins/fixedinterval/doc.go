// Package fixedinterval checkpoints every checkpointable job at a fixed
// interval (--checkpoint fixed:60m).
package fixedinterval
