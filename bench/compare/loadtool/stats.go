// Closed-loop load shared by the etcd and Redis load tools: N goroutines ("clients"), each with one request in
// flight, until a deadline or a request budget, whichever comes first. Every sample counts in the percentiles
// (successful and failed requests alike, as in mayfly-bench); ops/s counts successful requests only.
package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Load describes one closed-loop run.
type Load struct {
	Clients  int
	Seconds  float64
	MaxOps   int64
	MaxError int // distinct error messages kept (their counts are always complete)
}

// Result is what one run measured; printed as one JSON line for the orchestrator.
type Result struct {
	System    string           `json:"system"`
	Workload  string           `json:"workload"`
	Clients   int              `json:"clients"`
	Issued    int64            `json:"issued"`
	Ok        int64            `json:"ok"`
	Errors    int64            `json:"errors"`
	ErrorKind map[string]int64 `json:"error_kinds"`
	WallS     float64          `json:"wall_s"`
	OpsPerS   float64          `json:"ops_per_s"`
	P50Ms     float64          `json:"p50_ms"`
	P90Ms     float64          `json:"p90_ms"`
	P99Ms     float64          `json:"p99_ms"`
	P999Ms    float64          `json:"p999_ms"`
	MaxMs     float64          `json:"max_ms"`
	CPUS      float64          `json:"load_tool_cpu_s"`
}

// One client's loop: op(client, seq) performs one request and returns nil on success.
type opFunc func(client int, seq int64) error

// Run drives the load and returns its result (System and Workload are left to the caller).
func (l Load) Run(op opFunc) Result {
	var issued int64
	var mu sync.Mutex
	errorKinds := map[string]int64{}
	var okCount, errCount int64
	latencies := make([][]float64, l.Clients)
	lastDone := make([]time.Time, l.Clients)
	cpuBefore := cpuSeconds()
	start := time.Now()
	deadline := start.Add(time.Duration(l.Seconds * float64(time.Second)))
	var wg sync.WaitGroup
	for c := 0; c < l.Clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			samples := make([]float64, 0, 1024)
			for {
				// Bounded in time and in count: no request starts after the deadline or past the budget, and each
				// one in flight ends within its own timeout.
				if !time.Now().Before(deadline) {
					break
				}
				seq := atomic.AddInt64(&issued, 1)
				if seq > l.MaxOps {
					atomic.AddInt64(&issued, -1)
					break
				}
				t0 := time.Now()
				err := op(c, seq)
				t1 := time.Now()
				samples = append(samples, float64(t1.Sub(t0).Nanoseconds())/1e6)
				lastDone[c] = t1
				if err != nil {
					atomic.AddInt64(&errCount, 1)
					msg := err.Error()
					if len(msg) > 160 {
						msg = msg[:160]
					}
					mu.Lock()
					if _, seen := errorKinds[msg]; seen || len(errorKinds) < l.MaxError {
						errorKinds[msg]++
					} else {
						errorKinds["(other)"]++
					}
					mu.Unlock()
				} else {
					atomic.AddInt64(&okCount, 1)
				}
			}
			latencies[c] = samples
		}(c)
	}
	wg.Wait()
	end := start
	var all []float64
	for c := range latencies {
		all = append(all, latencies[c]...)
		if lastDone[c].After(end) {
			end = lastDone[c]
		}
	}
	sort.Float64s(all)
	wall := end.Sub(start).Seconds()
	r := Result{
		Clients:   l.Clients,
		Issued:    issued,
		Ok:        okCount,
		Errors:    errCount,
		ErrorKind: errorKinds,
		WallS:     wall,
		OpsPerS:   float64(okCount) / math.Max(wall, 1e-9),
		P50Ms:     percentile(all, 50),
		P90Ms:     percentile(all, 90),
		P99Ms:     percentile(all, 99),
		P999Ms:    percentile(all, 99.9),
		CPUS:      cpuSeconds() - cpuBefore,
	}
	if len(all) > 0 {
		r.MaxMs = all[len(all)-1]
	}
	return r
}

// The nearest-rank percentile, as bench/bench_support.cc computes it.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// This process's user + system CPU seconds so far (/proc/self/stat, in clock ticks of 1/100 s on Linux).
func cpuSeconds() float64 {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields are counted after the last ')'.
	text := string(data)
	i := len(text) - 1
	for i >= 0 && text[i] != ')' {
		i--
	}
	var state string
	var f [12]int64
	_, err = fmt.Sscan(text[i+1:], &state, &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9],
		&f[10], &f[11])
	if err != nil {
		return 0
	}
	return float64(f[10]+f[11]) / 100 // utime, stime
}

func emit(r Result) {
	out, err := json.Marshal(r)
	if err != nil {
		fail("json: %v", err)
	}
	fmt.Println(string(out))
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "mayfly-compare-load: "+format+"\n", args...)
	os.Exit(1)
}
