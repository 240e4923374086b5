package clustertest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A register per key: get, put and compare-and-swap, checked for
// linearizability with porcupine.
type regInput struct {
	op     byte // 'g' get, 'p' put, 'c' compare-and-swap
	key    string
	value  string // put, cas: the new value
	expect string // cas: the value compared ("" is "absent")
}

type regOutput struct {
	value   string // get: the value read ("" absent)
	ok      bool   // cas: the compare held
	unknown bool   // put, cas: failed or timed out, outcome unknown
}

// registerModel is a map of registers, partitioned by key. An operation
// of unknown outcome returns at the end of the history, so porcupine may
// place it anywhere after its call, or last (where it is unobserved),
// which covers both "applied" and "lost".
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(regInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(regInput), output.(regOutput)
		switch in.op {
		case 'g':
			return out.value == s, s
		case 'p':
			return true, in.value
		default:
			holds := s == in.expect
			if out.unknown {
				if holds {
					return true, in.value
				}
				return true, s
			}
			if out.ok != holds {
				return false, s
			}
			if holds {
				return true, in.value
			}
			return true, s
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		switch {
		case in.op == 'g':
			return fmt.Sprintf("get(%s) -> %q", in.key, out.value)
		case out.unknown && in.op == 'p':
			return fmt.Sprintf("put(%s, %s) -> unknown", in.key, in.value)
		case in.op == 'p':
			return fmt.Sprintf("put(%s, %s)", in.key, in.value)
		case out.unknown:
			return fmt.Sprintf("cas(%s, %q -> %s) -> unknown", in.key, in.expect, in.value)
		default:
			return fmt.Sprintf("cas(%s, %q -> %s) -> %v", in.key, in.expect, in.value, out.ok)
		}
	},
}

// linearizabilitySeconds is how long the history is recorded: 10 s in CI,
// STRATA_LINEARIZABILITY_SECONDS for longer runs by hand.
func linearizabilitySeconds(t *testing.T) time.Duration {
	if s := os.Getenv("STRATA_LINEARIZABILITY_SECONDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("STRATA_LINEARIZABILITY_SECONDS = %q: must be a positive number of seconds", s)
		}
		return time.Duration(n) * time.Second
	}
	return 10 * time.Second
}

// TestLinearizable records a history of gets (linearizable), puts and
// compare-and-swap Txns from clients on every member while members are
// killed with SIGKILL and restarted, one at a time, and checks it with
// porcupine: 0 violations. Snapshots are taken every 300 entries, so
// restarted members also catch up by snapshot.
func TestLinearizable(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STRATA_LINEARIZABILITY_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (STRATA_LINEARIZABILITY_SEED replays the choices, not the timing)", seed)
	c := newProcCluster(t, 3, 300)
	c.leader()
	keys := []string{"r0", "r1", "r2"}
	duration := linearizabilitySeconds(t)
	start := time.Now()
	now := func() int64 { return time.Since(start).Nanoseconds() }

	var (
		mu      sync.Mutex
		history []porcupine.Operation
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const clientsPerMember = 2
	for i, m := range c.members {
		for j := range clientsPerMember {
			id := i*clientsPerMember + j
			cli := c.client(m)
			r := rand.New(rand.NewPCG(seed, uint64(id)))
			wg.Go(func() {
				last := map[string]string{} // this client's last known value per key
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					in := regInput{key: keys[r.IntN(len(keys))]}
					switch p := r.IntN(10); {
					case p < 4:
						in.op = 'g'
					case p < 7:
						in.op, in.value = 'p', fmt.Sprintf("c%d-%d", id, n)
					default:
						in.op, in.value, in.expect = 'c', fmt.Sprintf("c%d-%d", id, n), last[in.key]
					}
					call := now()
					out, err := runOp(cli, in)
					ret := now()
					if err != nil {
						if in.op == 'g' {
							time.Sleep(20 * time.Millisecond)
							continue // a failed read has no effect
						}
						out, ret = regOutput{unknown: true}, math.MaxInt64
						time.Sleep(20 * time.Millisecond)
					}
					switch {
					case in.op == 'g':
						last[in.key] = out.value
					case !out.unknown && (in.op == 'p' || out.ok):
						last[in.key] = in.value
					}
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
					mu.Unlock()
				}
			})
		}
	}

	// The nemesis: kill a random member, restart it, repeat.
	r := rand.New(rand.NewPCG(seed, 1<<32))
	kills := 0
	for time.Since(start) < duration {
		time.Sleep(time.Duration(500+r.IntN(1000)) * time.Millisecond)
		m := c.members[r.IntN(len(c.members))]
		c.kill(m)
		kills++
		time.Sleep(time.Duration(300+r.IntN(1200)) * time.Millisecond)
		c.start(m)
	}
	close(stop)
	wg.Wait()

	var unknown, gets int
	for _, op := range history {
		if op.Output.(regOutput).unknown {
			unknown++
		}
		if op.Input.(regInput).op == 'g' {
			gets++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, history, time.Minute)
	t.Logf("%d operations (%d gets, %d of unknown outcome) in %v with %d kills: %v", len(history), gets, unknown, duration, kills, res)
	if len(history) < 100 {
		t.Fatalf("only %d operations recorded", len(history))
	}
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		path := filepath.Join(t.TempDir(), "history.html")
		if err := porcupine.VisualizePath(registerModel, info, path); err == nil {
			t.Logf("visualization: %s", path)
		}
		t.Fatal("the history is not linearizable")
	default:
		t.Fatal("porcupine could not decide within a minute: shorten the history")
	}
}

// runOp runs one operation with a 2 s timeout.
func runOp(cli *clientv3.Client, in regInput) (regOutput, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	switch in.op {
	case 'g':
		resp, err := cli.Get(ctx, in.key)
		if err != nil {
			return regOutput{}, err
		}
		if len(resp.Kvs) == 0 {
			return regOutput{}, nil
		}
		return regOutput{value: string(resp.Kvs[0].Value)}, nil
	case 'p':
		_, err := cli.Put(ctx, in.key, in.value)
		return regOutput{}, err
	default:
		cmp := clientv3.Compare(clientv3.Value(in.key), "=", in.expect)
		if in.expect == "" {
			cmp = clientv3.Compare(clientv3.CreateRevision(in.key), "=", 0)
		}
		resp, err := cli.Txn(ctx).If(cmp).Then(clientv3.OpPut(in.key, in.value)).Commit()
		if err != nil {
			return regOutput{}, err
		}
		return regOutput{ok: resp.Succeeded}, nil
	}
}
