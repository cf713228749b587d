// Package nvml is the only code in Prescient that calls go-nvml. It gives
// the collector a narrow view of a GPU host (Host, Device) and turns every
// nvml.Return into an error at its boundary.
//
// Open chooses the backend: the real libnvidia-ml.so when it loads, or a
// simulated host built on go-nvml's mock servers (mock/server with the
// mock/gpus configurations). The simulated GPUs follow a load model: the
// jobs assigned to them through Assign (the node agent or the simulator
// says which job runs on which GPU and how hard it works), and otherwise a
// stochastic load calibrated to the AcmeTrace utilization CDFs (ReadCDFs).
// Real and simulated hosts run the same code above the nvml.Interface, so
// the simulator exercises the collector's real sampling path.
package nvml
