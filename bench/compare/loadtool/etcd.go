// The etcd side: etcd's own Go client (clientv3, from Debian's golang-etcd-server-dev), as an etcd user would call it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/clientv3"
)

func newEtcdClients(endpoints []string, n int) []*clientv3.Client {
	clients := make([]*clientv3.Client, 0, n)
	for i := 0; i < n; i++ {
		c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
		if err != nil {
			fail("etcd client: %v", err)
		}
		clients = append(clients, c)
	}
	return clients
}

// The endpoint whose member is the leader, as the members report it (Status), within `timeout`.
func etcdLeader(endpoints []string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	var last error = errors.New("no answer")
	for time.Now().Before(deadline) {
		for _, ep := range endpoints {
			c, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: time.Second})
			if err != nil {
				last = err
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, err := c.Status(ctx, ep)
			cancel()
			c.Close()
			if err != nil {
				last = err
				continue
			}
			if st.Leader != 0 && st.Leader == st.Header.MemberId {
				return ep, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("no etcd leader within %v: %v", timeout, last)
}

func etcdWaitMain(args []string) {
	fs := flag.NewFlagSet("etcd-wait", flag.ExitOnError)
	endpoints := fs.String("endpoints", "", "comma-separated client URLs")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	fs.Parse(args)
	leader, err := etcdLeader(strings.Split(*endpoints, ","), *timeout)
	if err != nil {
		fail("%v", err)
	}
	fmt.Println(leader)
}

func etcdMain(args []string) {
	fs := flag.NewFlagSet("etcd", flag.ExitOnError)
	endpoints := fs.String("endpoints", "", "comma-separated client URLs of every member")
	workload := fs.String("workload", "put", "put | lease-put | get-linearizable | get-serializable")
	clients := fs.Int("clients", 1, "requests kept in flight (one goroutine each)")
	conns := fs.Int("conns", 4, "clientv3 clients (gRPC connections per member) shared by the goroutines")
	seconds := fs.Float64("seconds", 10, "")
	maxOps := fs.Int64("max-ops", 2000000, "request budget")
	valueSize := fs.Int("value-size", 256, "bytes per value")
	preload := fs.Int("preload", 2000, "keys written before a get workload; gets pick among them at random")
	ttl := fs.Int64("ttl", 3600, "lease TTL in seconds (lease-put)")
	timeoutMs := fs.Int("timeout-ms", 10000, "each request's bound")
	seed := fs.Int64("seed", 42, "")
	writesTo := fs.String("writes-to", "leader", "leader | all: where puts and lease grants go")
	fs.Parse(args)
	if *clients < 1 || *conns < 1 || *seconds <= 0 || *maxOps < 1 || *valueSize < 1 || *preload < 1 {
		fail("every number must be positive")
	}
	members := strings.Split(*endpoints, ",")
	// Writes go to the leader, reads are spread over every member by clientv3's balancer: what Mayfly's client
	// does too (writes to the leader it learns, reads round-robin over the endpoints). --writes-to all spreads
	// writes too (clientv3's default with every endpoint; followers forward them to the leader).
	if *writesTo != "leader" && *writesTo != "all" {
		fail("--writes-to: leader or all")
	}
	target := members
	write := *workload == "put" || *workload == "lease-put"
	if write && *writesTo == "leader" {
		leader, err := etcdLeader(members, 30*time.Second)
		if err != nil {
			fail("%v", err)
		}
		target = []string{leader}
	}
	if *conns > *clients {
		*conns = *clients
	}
	cs := newEtcdClients(target, *conns)
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	value := strings.Repeat("x", *valueSize)
	timeout := time.Duration(*timeoutMs) * time.Millisecond
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	load := Load{Clients: *clients, Seconds: *seconds, MaxOps: *maxOps, MaxError: 20}

	var op opFunc
	switch *workload {
	case "put":
		op = func(c int, seq int64) error {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			_, err := cs[c%len(cs)].Put(ctx, fmt.Sprintf("bench/%s/put/%09d", run, seq), value)
			return err
		}
	case "lease-put":
		// Each key carries its own expiry: one lease per key (an etcd lease is the only way to expire a key).
		op = func(c int, seq int64) error {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			cli := cs[c%len(cs)]
			lease, err := cli.Grant(ctx, *ttl)
			if err != nil {
				return fmt.Errorf("grant: %w", err)
			}
			_, err = cli.Put(ctx, fmt.Sprintf("bench/%s/lease/%09d", run, seq), value, clientv3.WithLease(lease.ID))
			return err
		}
	case "get-linearizable", "get-serializable":
		keys := make([]string, *preload)
		for i := range keys {
			keys[i] = fmt.Sprintf("bench/%s/read/%06d", run, i)
		}
		var next int64 = -1
		pre := Load{Clients: 50, Seconds: 120, MaxOps: int64(*preload), MaxError: 5}.Run(
			func(c int, _ int64) error {
				i := atomic.AddInt64(&next, 1)
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				_, err := cs[c%len(cs)].Put(ctx, keys[i], value)
				return err
			})
		if pre.Errors > 0 || pre.Ok != int64(*preload) {
			fail("preload: %d of %d keys written, errors %v", pre.Ok, *preload, pre.ErrorKind)
		}
		var opts []clientv3.OpOption
		if *workload == "get-serializable" {
			opts = append(opts, clientv3.WithSerializable())
		}
		rngs := make([]*rand.Rand, *clients)
		for i := range rngs {
			rngs[i] = rand.New(rand.NewSource(*seed + int64(i)))
		}
		op = func(c int, _ int64) error {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			key := keys[rngs[c].Intn(len(keys))]
			resp, err := cs[c%len(cs)].Get(ctx, key, opts...)
			if err != nil {
				return err
			}
			if len(resp.Kvs) != 1 || len(resp.Kvs[0].Value) != *valueSize {
				return errors.New("get: key missing or wrong value")
			}
			return nil
		}
	default:
		fail("unknown etcd workload %q", *workload)
	}
	r := load.Run(op)
	r.System, r.Workload = "etcd", *workload
	emit(r)
}
