// The Redis side: SET then WAIT <replicas> <timeout>, pipelined on one connection per client (redigo, from Debian's
// golang-github-gomodule-redigo-dev). An operation counts only when WAIT says every replica acknowledged it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

func redisDial(addr string, timeout time.Duration) (redis.Conn, error) {
	return redis.Dial("tcp", addr, redis.DialConnectTimeout(5*time.Second), redis.DialReadTimeout(timeout),
		redis.DialWriteTimeout(timeout))
}

func redisWaitMain(args []string) {
	fs := flag.NewFlagSet("redis-wait", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:6379", "the primary")
	replicas := fs.Int("replicas", 2, "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	fs.Parse(args)
	deadline := time.Now().Add(*timeout)
	last := errors.New("no answer")
	for time.Now().Before(deadline) {
		c, err := redisDial(*addr, time.Second)
		if err == nil {
			info, err2 := redis.String(c.Do("INFO", "replication"))
			online := strings.Count(info, "state=online")
			if err2 == nil && online >= *replicas {
				// Every replica online: a write that all of them acknowledge proves the links work end to end.
				_, err2 = c.Do("SET", "bench:ready", "1")
				n, err3 := redis.Int(c.Do("WAIT", *replicas, 1000))
				if err2 == nil && err3 == nil && n >= *replicas {
					c.Close()
					fmt.Println("ready")
					return
				}
			}
			last = fmt.Errorf("%d replicas online (%v)", online, err2)
			c.Close()
		} else {
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	fail("redis at %s not ready within %v: %v", *addr, *timeout, last)
}

func redisMain(args []string) {
	fs := flag.NewFlagSet("redis", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:6379", "the primary")
	clients := fs.Int("clients", 50, "connections, one request (SET + WAIT) in flight on each")
	seconds := fs.Float64("seconds", 10, "")
	maxOps := fs.Int64("max-ops", 2000000, "request budget")
	valueSize := fs.Int("value-size", 256, "")
	replicas := fs.Int("replicas", 2, "WAIT for this many replicas")
	waitMs := fs.Int("wait-timeout-ms", 1000, "WAIT's own timeout")
	timeoutMs := fs.Int("timeout-ms", 10000, "socket read/write bound")
	fs.Parse(args)
	if *clients < 1 || *seconds <= 0 || *maxOps < 1 || *valueSize < 1 || *replicas < 0 || *waitMs < 1 {
		fail("every number must be positive")
	}
	timeout := time.Duration(*timeoutMs) * time.Millisecond
	conns := make([]redis.Conn, *clients)
	for i := range conns {
		c, err := redisDial(*addr, timeout)
		if err != nil {
			fail("connect %s: %v", *addr, err)
		}
		conns[i] = c
	}
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	value := strings.Repeat("x", *valueSize)
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	load := Load{Clients: *clients, Seconds: *seconds, MaxOps: *maxOps, MaxError: 20}
	r := load.Run(func(c int, seq int64) error {
		conn := conns[c]
		if conn == nil || conn.Err() != nil {
			if conn != nil {
				conn.Close()
			}
			fresh, err := redisDial(*addr, timeout)
			if err != nil {
				conns[c] = nil
				time.Sleep(10 * time.Millisecond) // a refused connect must not spin: the loop is bounded anyway
				return fmt.Errorf("reconnect: %w", err)
			}
			conns[c], conn = fresh, fresh
		}
		conn.Send("SET", fmt.Sprintf("bench:%s:%09d", run, seq), value)
		conn.Send("WAIT", *replicas, *waitMs)
		if err := conn.Flush(); err != nil {
			return err
		}
		if ok, err := redis.String(conn.Receive()); err != nil || ok != "OK" {
			conn.Receive() // WAIT's reply, to keep the connection in step
			return fmt.Errorf("set: %q %v", ok, err)
		}
		n, err := redis.Int(conn.Receive())
		if err != nil {
			return fmt.Errorf("wait: %v", err)
		}
		if n < *replicas {
			return fmt.Errorf("wait: %d of %d replicas acknowledged within %d ms", n, *replicas, *waitMs)
		}
		return nil
	})
	r.System, r.Workload = "redis", fmt.Sprintf("set+wait%d", *replicas)
	emit(r)
}
