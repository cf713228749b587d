package datasets

import "io"

// The Alibaba GenAI trace's per-container GPU duty cycle
// (pod_gpu_duty_cycle_anon.csv, the same columns as the memory file):
// the share of time a kernel ran on the container's GPU, in percent, about
// every 57 s. Idle forecasting counts the containers of a pool whose duty
// cycle is below the idle threshold.
const genaiDoc = "Alibaba GenAI pod GPU duty cycle (pod_gpu_duty_cycle_anon.csv: timestamp_anon,value,container_ip): " +
	"GPU utilization in % (0 to 100); one series per container"

func init() {
	registerSeries(SeriesFormat{Name: "genai", Doc: genaiDoc, Read: readGenaiDutySeries})
}

func readGenaiDutySeries(r io.Reader, file string) ([]Series, error) {
	return readGenaiMetric(r, file, 100)
}
