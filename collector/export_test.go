package collector

// SetSpoolDropHook lets tests see what a full spool drops.
func SetSpoolDropHook(s *Spool, f func(samples int, bytes int64)) { s.onDrop = f }

// ReadRecord is the spool's record reader, for the fuzzer.
var ReadRecord = readRecord

// EncodeRecord is the spool's record writer, for the fuzzer's seeds.
var EncodeRecord = encodeRecord
