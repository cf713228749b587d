// Package fifo orders the queue by submit time: first come, first served.
// With executor.HeadOfLine blocking it is strict FIFO: nothing overtakes a
// job that does not fit.
package fifo
