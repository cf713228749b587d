package sim

import (
	"slices"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

// dataCaches are the nodes' local dataset caches (Config.DataCacheBytes):
// an attempt that starts on a node leaves a warm copy of its dataset there,
// the least recently used copies making room, and the queued jobs naming
// that dataset see the node warm at the next plan.
type dataCaches struct {
	capacity int64
	nodes    []nodeCache                // by node index
	holders  map[string]map[int]bool    // dataset → nodes holding a copy
	names    map[string][]string        // dataset → names of those nodes, sorted (rebuilt when stale)
	stale    map[string]bool            // datasets whose holders changed since names was built
	orig     map[cluster.JobID][]string // queued jobs' own warm nodes, before the caches'
}

// nodeCache is one node's copies by dataset and the bytes they take.
type nodeCache struct {
	used   int64
	copies map[string]*cachedCopy
}

type cachedCopy struct {
	bytes   int64
	lastUse time.Time
}

func (dc *dataCaches) init(s *Simulator) {
	dc.capacity = s.cfg.DataCacheBytes
	if dc.capacity <= 0 {
		return
	}
	dc.nodes = make([]nodeCache, len(s.snap.Nodes))
	dc.holders, dc.names, dc.stale, dc.orig = map[string]map[int]bool{}, map[string][]string{}, map[string]bool{}, map[cluster.JobID][]string{}
}

// started records that an attempt reading d started on the allocations'
// nodes: each now holds a copy (if it fits the cache at all), evicting the
// least recently used copies of other datasets to make room.
func (dc *dataCaches) started(s *Simulator, d *cluster.DataSource, allocs []cluster.Allocation) {
	if dc.capacity <= 0 || d == nil || d.Bytes > dc.capacity {
		return
	}
	for _, al := range allocs {
		i, ok := s.free.NodeIndex(al.GPU.Node)
		if !ok {
			continue
		}
		nc := &dc.nodes[i]
		if nc.copies == nil {
			nc.copies = map[string]*cachedCopy{}
		}
		if c, ok := nc.copies[d.Name]; ok {
			c.lastUse = s.now
			continue
		}
		for nc.used+d.Bytes > dc.capacity {
			victim, oldest := "", time.Time{}
			for name, c := range nc.copies {
				if victim == "" || c.lastUse.Before(oldest) || c.lastUse.Equal(oldest) && name < victim {
					victim, oldest = name, c.lastUse
				}
			}
			nc.used -= nc.copies[victim].bytes
			delete(nc.copies, victim)
			delete(dc.holders[victim], i)
			dc.stale[victim] = true
		}
		nc.copies[d.Name] = &cachedCopy{bytes: d.Bytes, lastUse: s.now}
		nc.used += d.Bytes
		if dc.holders[d.Name] == nil {
			dc.holders[d.Name] = map[int]bool{}
		}
		dc.holders[d.Name][i] = true
		dc.stale[d.Name] = true
	}
}

// warmQueue gives each queued job naming a cached dataset the nodes that
// hold a copy, besides the warm nodes it named itself.
func (dc *dataCaches) warmQueue(s *Simulator, queue []*executor.JobView) {
	if dc.capacity <= 0 {
		return
	}
	for name := range dc.stale {
		var ns []string
		for i := range dc.holders[name] {
			ns = append(ns, s.snap.Nodes[i].Name)
		}
		slices.Sort(ns)
		dc.names[name] = ns
	}
	clear(dc.stale)
	for _, v := range queue {
		d := v.Job.Spec.Data
		if d == nil {
			continue
		}
		own, ok := dc.orig[v.Job.ID]
		if !ok {
			own = slices.Clone(d.Nodes)
			dc.orig[v.Job.ID] = own
		}
		cached := dc.names[d.Name]
		if len(cached) == 0 && len(d.Nodes) == len(own) {
			continue
		}
		nodes := slices.Clone(own)
		for _, n := range cached {
			if !slices.Contains(own, n) {
				nodes = append(nodes, n)
			}
		}
		v.Job.Spec.Data = &cluster.DataSource{Name: d.Name, Bytes: d.Bytes, Nodes: nodes, Racks: d.Racks}
	}
}
