// mayfly-compare-load: the load tools of `make bench-compare` (bench/compare/README.md) for etcd and Redis.
//
//	mayfly-compare-load etcd-wait  --endpoints URL,URL,URL        prints the leader's endpoint once there is one
//	mayfly-compare-load etcd       --endpoints ... --workload put|lease-put|get-linearizable|get-serializable ...
//	mayfly-compare-load redis-wait --addr H:P --replicas 2         returns once both replicas acknowledge a write
//	mayfly-compare-load redis      --addr H:P --clients N ...      SET + WAIT 2 per operation
//
// Each load prints one JSON line (ops/s, percentiles over every sample, errors by message).
// Built offline in GOPATH mode against Debian's /usr/share/gocode (bench/compare/run.py does it).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: mayfly-compare-load etcd-wait|etcd|redis-wait|redis [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "etcd-wait":
		etcdWaitMain(os.Args[2:])
	case "etcd":
		etcdMain(os.Args[2:])
	case "redis-wait":
		redisWaitMain(os.Args[2:])
	case "redis":
		redisMain(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "usage: mayfly-compare-load etcd-wait|etcd|redis-wait|redis [flags]")
		os.Exit(2)
	}
}
