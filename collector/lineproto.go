package collector

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// AppendLineProtocol appends the samples as InfluxDB line protocol, one gpu
// line per sample and one gpu_process line per process, with nanosecond
// timestamps. Fields a sample lacks (nvml.DeviceSample.Missing) and values
// that are not finite are left out; a sample left with no field is left
// out whole (line protocol has no empty lines). It returns the buffer and
// the number of gpu lines written.
//
// Tags, in key order: gpu_index, gpu_uuid, model, node; for a MIG device also
// gpu_instance_id and parent_uuid. A process line has gpu_uuid, job_id
// (when known), node and pid.
func AppendLineProtocol(b []byte, samples []Sample) ([]byte, int) {
	lines := 0
	for i := range samples {
		s := &samples[i]
		ts := s.Time.UnixNano()
		start := len(b)
		b = append(b, MeasurementGPU...)
		b = appendTag(b, "gpu_index", strconv.Itoa(s.Index))
		if s.MIG {
			b = appendTag(b, "gpu_instance_id", strconv.Itoa(s.GPUInstanceID))
		}
		b = appendTag(b, "gpu_uuid", s.UUID)
		b = appendTag(b, "model", s.Model)
		b = appendTag(b, "node", s.Node)
		if s.MIG {
			b = appendTag(b, "parent_uuid", s.ParentUUID)
		}
		sep := byte(' ')
		n := 0
		for _, f := range Fields {
			if !s.Has(f.Flag) {
				continue
			}
			if f.Int {
				b = append(b, sep)
				b = append(b, f.Name...)
				b = append(b, '=')
				b = strconv.AppendInt(b, f.IntValue(s), 10)
				b = append(b, 'i')
			} else {
				v := f.Value(s)
				if math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				b = append(b, sep)
				b = append(b, f.Name...)
				b = append(b, '=')
				b = strconv.AppendFloat(b, v, 'g', -1, 64)
			}
			sep = ','
			n++
		}
		if n == 0 {
			b = b[:start]
			continue
		}
		b = append(b, ' ')
		b = strconv.AppendInt(b, ts, 10)
		b = append(b, '\n')
		lines++
		for _, p := range s.Processes {
			b = append(b, MeasurementProcess...)
			b = appendTag(b, "gpu_uuid", s.UUID)
			b = appendTag(b, "job_id", p.JobID)
			for _, k := range sortedKeys(p.LabelTags) {
				b = appendTag(b, labelKey(k), p.LabelTags[k])
			}
			b = appendTag(b, "node", s.Node)
			b = appendTag(b, "pid", strconv.Itoa(p.PID))
			b = append(b, " mem_used_bytes="...)
			b = strconv.AppendInt(b, int64(p.MemUsedBytes), 10)
			b = append(b, 'i')
			for _, k := range sortedKeys(p.LabelFields) {
				b = appendStringField(b, labelKey(k), p.LabelFields[k])
			}
			b = append(b, ' ')
			b = strconv.AppendInt(b, ts, 10)
			b = append(b, '\n')
		}
	}
	return b, lines
}

// appendTag appends ",key=value" with the value escaped; an empty value
// is left out, as line protocol does not allow one.
func appendTag(b []byte, key, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, ',')
	b = append(b, key...)
	b = append(b, '=')
	if !strings.ContainsAny(value, ",= \\\n") {
		return append(b, value...)
	}
	for i := 0; i < len(value); i++ {
		switch c := value[i]; c {
		case ',', '=', ' ', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, ' ') // a newline cannot be escaped in a tag
		default:
			b = append(b, c)
		}
	}
	return b
}

// labelKey is the tag or field key of a job label: "label_" and the
// label's key, with what line protocol cannot hold in a key replaced by
// "_".
func labelKey(k string) string {
	b := []byte("label_")
	for i := 0; i < len(k); i++ {
		switch c := k[i]; {
		case c == ',' || c == '=' || c == ' ' || c == '\\' || c == '"' || c < 0x20 || c == 0x7f:
			b = append(b, '_')
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

// appendStringField appends ",key=\"value\"" with the value's quotes and
// backslashes escaped and newlines turned into spaces.
func appendStringField(b []byte, key, value string) []byte {
	b = append(b, ',')
	b = append(b, key...)
	b = append(b, '=', '"')
	for i := 0; i < len(value); i++ {
		switch c := value[i]; c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n', '\r':
			b = append(b, ' ')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// sortedKeys lists m's keys in order, so that a sample always encodes the
// same way.
func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
