package placement

// Choice is where a request goes: the node's position in the list given
// to Place, the GPUs of that node, and the winning score.
type Choice struct {
	Node  int
	GPUs  []int
	Score float64
	// Feasible counts the nodes that could take the request.
	Feasible int
}

// Scratch holds buffers Place reuses between calls; the zero value is
// ready. It is not safe for concurrent use.
type Scratch struct {
	feasible []int
	scores   []float64
	gpus     [][]int
}

// Place runs the three steps of a placement over nodes: filter (Fits),
// score every feasible node, and pick the best score, ties broken at
// random with ctx.Rand (kube-scheduler's selectHost) or to the first node
// without it. A single feasible node is taken without scoring, as
// kube-scheduler does. ok is false when no node fits. The returned GPUs
// belong to s until the next call.
func Place(nodes []*Node, r *Request, sc Scorer, ctx *Context, s *Scratch) (Choice, bool) {
	s.feasible = s.feasible[:0]
	for i, n := range nodes {
		if n.Fits(r) {
			s.feasible = append(s.feasible, i)
		}
	}
	if len(s.feasible) == 0 {
		return Choice{}, false
	}
	if len(s.scores) < len(s.feasible) {
		s.scores = make([]float64, len(s.feasible))
		s.gpus = make([][]int, len(s.feasible))
	}
	scores := s.scores[:len(s.feasible)]
	for k, i := range s.feasible {
		scores[k], s.gpus[k] = sc.Score(nodes[i], r, ctx, s.gpus[k])
	}
	if nz, ok := sc.(Normalizer); ok && len(scores) > 1 {
		nz.Normalize(scores)
	}
	best, ties := 0, 1
	for k := 1; k < len(scores); k++ {
		switch {
		case scores[k] > scores[best]:
			best, ties = k, 1
		case scores[k] == scores[best] && ctx.RandomTies && ctx.Rand != nil:
			if ties++; ctx.Rand.IntN(ties) == 0 {
				best = k
			}
		}
	}
	return Choice{Node: s.feasible[best], GPUs: s.gpus[best], Score: scores[best], Feasible: len(s.feasible)}, true
}
