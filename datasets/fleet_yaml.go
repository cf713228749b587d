package datasets

import "github.com/prescient-sched/prescient/cluster"

const yamlFleetDoc = "Prescient fleet file (YAML, see examples/fleet.yaml), read by cluster.ReadFleetFile"

func init() {
	registerFleet(FleetFormat{Name: "yaml", Doc: yamlFleetDoc, Open: func(path string) (*cluster.Fleet, error) {
		return readFleetFile(path, cluster.ReadFleetFile)
	}})
}
