package domain

// BenchResult is one measured operation of the scheduler benchmark: what
// one strategy (Algorithm: StrategyHeap or StrategyTimingWheel) costs per
// operation at one index size. The scheduler measures it, the API returns
// it and the dashboard charts it.
type BenchResult struct {
	Algorithm   string  `json:"algorithm"`
	Size        int     `json:"size"`
	Op          string  `json:"op"`
	NsPerOp     float64 `json:"ns_per_op"`
	AllocsPerOp float64 `json:"allocs_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
}
