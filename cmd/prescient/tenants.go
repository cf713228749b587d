package main

import (
	"os"

	"github.com/prescient-sched/prescient/cluster"
)

// readTenantsFile reads a tenants file (cluster.ReadTenantsFile).
func readTenantsFile(path string) ([]cluster.Tenant, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return cluster.ReadTenantsFile(f, path)
}
