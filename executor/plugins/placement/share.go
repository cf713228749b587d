package placement

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

type roomList struct {
	grown uint64
	nodes []int
	// maxFree bounds the largest free share of each node's GPUs from
	// above; it is tightened whenever a node is looked at.
	maxFree []int16
	// byTenant bounds, per tenant, the largest share of each node's GPUs
	// that tenant may take (free, or shared with its own jobs): used when
	// tenants may not share GPUs; tightened likewise.
	byTenant map[string][]int16
}

// tenantBound is the per-node bound of what tenant may take.
func (r *roomList) tenantBound(tenant string) []int16 {
	b, ok := r.byTenant[tenant]
	if !ok {
		if r.byTenant == nil {
			r.byTenant = map[string][]int16{}
		}
		b = slices.Clone(r.maxFree)
		r.byTenant[tenant] = b
	}
	return b
}

// roomOf lists the ready nodes of c that may have GPU share free, fullest
// buckets first, with an upper bound of each one's largest free share.
func (cp *cyclePlacer) roomOf(c *executor.Capacity) *roomList {
	if r, ok := cp.withRoom[c]; ok && r.grown == c.Grown() {
		return r
	}
	if cp.withRoom == nil {
		cp.withRoom = map[*executor.Capacity]*roomList{}
	}
	r := &roomList{grown: c.Grown()}
	for k := 0; k <= c.MaxNodeGPUs(); k++ {
		for _, i32 := range c.Bucket(k) {
			i := int(i32)
			for len(r.maxFree) <= i {
				r.maxFree = append(r.maxFree, 0)
			}
			if m := maxFreeShare(c, i); m > 0 {
				r.nodes = append(r.nodes, i)
				r.maxFree[i] = int16(m)
			}
		}
	}
	cp.withRoom[c] = r
	return r
}

// maxFreeShare is the largest free share of node i's GPUs.
func maxFreeShare(c *executor.Capacity, i int) int {
	m := 0
	for g := range c.Node(i).GPUs {
		m = max(m, c.FreeMilli(i, g))
	}
	return m
}

type proposal struct {
	tenant string
	milli  int
	memory int64
}

type failKey struct {
	c      *executor.Capacity
	tenant string
	models string
}

type failVal struct {
	grown  uint64
	milli  int
	need   int64
	reason string
}

// placeShare puts a fractional job on the best GPU it may share.
func (cp *cyclePlacer) placeShare(job *cluster.Job, req *Request, c *executor.Capacity, ctx *Context) ([]cluster.Allocation, bool, string) {
	cp.resetMemo()
	bestNode, bestGPU, best, bestScore := -1, -1, math.Inf(-1), 0.0
	refused := false
	need, forecast := cp.memP90(job.ID)
	var emptySeen []string // models of wholly free nodes scored already: the others score the same and lose the tie
	room := cp.roomOf(c)
	bound, perTenant := room.maxFree, !cp.args.AllowCrossTenantSharing
	if perTenant {
		bound = room.tenantBound(job.Spec.Tenant)
	}
	for _, i := range room.nodes {
		if int(room.maxFree[i]) < req.Milli || int(bound[i]) < req.Milli {
			continue
		}
		if m := maxFreeShare(c, i); m < req.Milli {
			room.maxFree[i] = int16(m)
			continue
		}
		n := c.Node(i)
		if !req.allowsOn(n) {
			continue
		}
		nodeReq := req // on MIG GPUs the share is a whole instance
		if n.GPUs[0].MIGEnabled {
			prof, ok := MIGProfileFor(n.GPUs[0].Model, n.GPUs[0].MemoryBytes, req.Milli, need)
			if !ok {
				continue
			}
			r := *req
			r.Milli = prof.Milli()
			nodeReq = &r
		}
		if c.WholeFree(i) == len(n.GPUs) && cp.locality(job, c, i) == 0 && job.Spec.NodePreference[n.Name] == 0 { // a warm or preferred node scores apart
			if slices.Contains(emptySeen, n.GPUs[0].Model) {
				continue
			}
			emptySeen = append(emptySeen, n.GPUs[0].Model)
		}
		usable := 0 // the largest share the tenant may take here, whatever the memory
		v := cp.fillView(c, i, func(g, free int) bool {
			gpuNeed := need
			if !forecast {
				gpuNeed = int64(req.Milli) * n.GPUs[g].MemoryBytes / cluster.MilliGPU
			}
			ok, tenantOK := cp.mayShare(job, req, c, i, g, free, gpuNeed)
			if tenantOK {
				usable = max(usable, free)
			}
			refused = refused || !ok
			return ok
		})
		if perTenant {
			bound[i] = int16(min(int(bound[i]), usable))
		}
		if !v.Fits(nodeReq) {
			continue
		}
		v.mig = n.GPUs[0].MIGEnabled
		mv := cp.score(v, nodeReq, ctx)
		if sc := mv.score - cp.energyCost(job, c, i) + cp.locality(job, c, i) + job.Spec.NodePreference[n.Name]; sc > best {
			best, bestNode, bestGPU, bestScore = sc, i, mv.gpu, mv.score
		}
	}
	if bestNode < 0 {
		if refused {
			return nil, false, "no GPU has the share free that this job may share (tenant isolation or forecast memory)"
		}
		return nil, false, "no GPU has the share free"
	}
	return cp.shareOn(job, req, c, ctx, bestNode, bestGPU, bestScore)
}

// shareOn is the share of GPU g of node i that placeShare chose (a MIG
// instance on a MIG GPU), with why, the scorer's score being score.
func (cp *cyclePlacer) shareOn(job *cluster.Job, req *Request, c *executor.Capacity, ctx *Context, i, g int, score float64) ([]cluster.Allocation, bool, string) {
	n := c.Node(i)
	ref := cluster.GPURef{Node: n.Name, Index: g}
	milli := req.Milli
	var prof MIGProfile
	var start int
	if n.GPUs[g].MIGEnabled {
		prof, start, _ = cp.migFit(job, req, c, i, g, c.FreeMilli(i, g))
		milli = prof.Milli()
	}
	if cp.quiet {
		return []cluster.Allocation{{GPU: ref, Milli: milli}}, true, ""
	}
	why := fmt.Sprintf("%s: %d milli-GPUs of %s (%d free)", cp.name, req.Milli, ref, c.FreeMilli(i, g))
	if n.GPUs[g].MIGEnabled {
		why = fmt.Sprintf("%s: MIG instance %s at memory slice %d of %s (hardware isolation)", cp.name, prof.Name, start, ref)
	}
	if ex, ok := cp.scorer.(Explainer); ok {
		why += "; " + ex.Explain(cp.fillView(c, i, nil), req, ctx, score)
	}
	return []cluster.Allocation{{GPU: ref, Milli: milli}}, true, why + cp.energyNote(job, c, i)
}

// placeShareRemembering is placeShare with the failure memory.
func (cp *cyclePlacer) placeShareRemembering(job *cluster.Job, req *Request, c *executor.Capacity, ctx *Context) ([]cluster.Allocation, bool, string) {
	key := failKey{c: c, tenant: job.Spec.Tenant, models: strings.Join(req.Models, "|")}
	need, haveNeed := cp.memP90(job.ID)
	if !haveNeed {
		need = -1 // in proportion to the share: larger shares need more
	}
	// A failure carries over to a share at least as large whose footprint is
	// known to be at least as large: both forecast, or both in proportion.
	if f, ok := cp.failed[key]; ok && f.grown == c.Grown() && req.Milli >= f.milli &&
		(haveNeed && f.need >= 0 && need >= f.need || !haveNeed && f.need < 0) {
		return nil, false, f.reason
	}
	allocs, ok, why := cp.placeShare(job, req, c, ctx)
	if ok {
		if cp.proposed == nil {
			cp.proposed = map[cluster.GPURef][]proposal{}
		}
		gpu := allocs[0].GPU
		i, _ := c.NodeIndex(gpu.Node)
		mem := need
		if !haveNeed {
			mem = int64(req.Milli) * c.Node(i).GPUs[gpu.Index].MemoryBytes / cluster.MilliGPU
		}
		cp.proposed[gpu] = append(cp.proposed[gpu], proposal{tenant: job.Spec.Tenant, milli: allocs[0].Milli, memory: mem})
	}
	if !ok {
		if cp.failed == nil {
			cp.failed = map[failKey]failVal{}
		}
		f, seen := cp.failed[key]
		if !seen || f.grown != c.Grown() || req.Milli <= f.milli && need <= f.need {
			cp.failed[key] = failVal{grown: c.Grown(), milli: req.Milli, need: need, reason: why}
		}
	}
	return allocs, ok, why
}

// mayShare reports whether the job may take its share of GPU g of node i
// (ok) and whether its tenant may, memory aside (tenantOK), where the GPU
// has free milli-GPUs free, with a footprint of need bytes: a free
// GPU always (when the footprint fits its memory); a used one only within
// the tenant rules and when the forecast footprints fit its memory. A share
// held by no running job was handed out earlier in this cycle: it counts
// as held by the tenants this placer gave shares of the GPU to (with their
// footprints), or, if those do not explain it, as another tenant's with
// memory in proportion to it.
func (cp *cyclePlacer) mayShare(job *cluster.Job, req *Request, c *executor.Capacity, i, g, free int, need int64) (ok, tenantOK bool) {
	if free < req.Milli {
		return true, true // cannot take it anyway: leave the view as it is
	}
	n := c.Node(i)
	gpu := &n.GPUs[g]
	if gpu.MIGEnabled {
		_, _, ok := cp.migFit(job, req, c, i, g, free)
		return ok, true
	}
	if free == cluster.MilliGPU {
		return gpu.MemoryBytes == 0 || need <= gpu.MemoryBytes, true
	}
	occ := cp.occupancyOf(c, i, g)
	unknown := max(cluster.MilliGPU-free-occ.milli, 0)
	unknownMem, unknownSame := int64(unknown)*gpu.MemoryBytes/cluster.MilliGPU, false
	if unknown > 0 {
		sum, mem, same := 0, int64(0), true
		for _, p := range cp.proposed[cluster.GPURef{Node: n.Name, Index: g}] {
			sum, mem, same = sum+p.milli, mem+p.memory, same && p.tenant == job.Spec.Tenant
		}
		if sum >= unknown {
			unknownMem, unknownSame = mem, same
		}
	}
	if !cp.args.AllowCrossTenantSharing {
		if occ.mixed || occ.milli > 0 && occ.tenant != job.Spec.Tenant || unknown > 0 && !unknownSame {
			return false, false
		}
	}
	if gpu.MemoryBytes == 0 { // memory unknown (anonymised models): the share decides
		return true, true
	}
	used := occ.memory + int64(occ.noForec)*gpu.MemoryBytes/cluster.MilliGPU + unknownMem
	return used+need <= gpu.MemoryBytes, true
}

// migFit is the MIG instance a share gets on GPU g of node i: the
// smallest profile with the share's compute and the job's forecast memory,
// at a start slice beside the instances already there (MIG isolates
// tenants and memory in hardware, so neither is checked further).
func (cp *cyclePlacer) migFit(job *cluster.Job, req *Request, c *executor.Capacity, i, g, free int) (MIGProfile, int, bool) {
	n := c.Node(i)
	gpu := &n.GPUs[g]
	prof, ok := MIGProfileFor(gpu.Model, gpu.MemoryBytes, req.Milli, cp.memP90Bytes(job.ID))
	if !ok || free < prof.Milli() {
		return prof, 0, false
	}
	occ := cp.occupancyOf(c, i, g)
	sizes := occ.sizes
	unknown := cluster.MilliGPU - free - occ.milli
	if unknown > 0 {
		sizes = slices.Clone(sizes)
		for _, p := range cp.proposed[cluster.GPURef{Node: n.Name, Index: g}] {
			if unknown <= 0 {
				break
			}
			sizes = append(sizes, migSizeOf(p.milli))
			unknown -= p.milli
		}
		if unknown > 0 {
			sizes = append(sizes, migSizeOf(unknown))
		}
	}
	start, ok := migPlace(sizes, prof)
	return prof, start, ok
}
