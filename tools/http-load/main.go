// Command http-load is the gateway benchmark's load generator (bench/bench_gateway.py): native, so
// the figure measures the gateway and the backend, not the load tool (the Python generator spent
// more CPU per request than the fixed-reply backend it was measuring).
//
//	http-load -url A -url B -key K -seconds S -clients C [-rate R] [-stream] [-path P] [-slice S] [-seed N] -out F
//
// The two URLs take turns in slices of -slice seconds (A B B A A B B A ...), -seconds in all, so a
// load that comes and goes on a shared machine falls on both alike. Each URL has its own pool of
// -clients keep-alive connections, kept across slices (fasthttp's HostClient).
//
//   - Without -rate (saturated, throughput): -clients workers each send one request after the
//     other, no pause; the count over the URL's slices is its requests per second.
//   - With -rate R (paced, latency): arrivals at R requests/s in all, Poisson (exponential gaps
//     from a generator seeded by -seed and the pair of slices, so both URLs of a pair see the same
//     arrivals), handed to -clients workers; a latency counts from when the request is sent to the
//     answer's last byte (with -stream: its first chunk), so time queued in the load tool is not
//     the target's. Arrivals no worker was free for are counted as "late" instead.
//
// Writes JSON to -out: per URL {"url", "rps", "latencies_ms", "errors", "late", "first_error",
// "warm_up"}; "warm_up" counts the requests answered in the URL's warm-up, which "rps" leaves out,
// so that a process's CPU over the whole run can be divided by every request it served.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

const warmUp = 500 * time.Millisecond // connections opened, caches filled, before anything counts

type urls []string

func (u *urls) String() string     { return fmt.Sprint(*u) }
func (u *urls) Set(s string) error { *u = append(*u, s); return nil }

// target is one URL with its connection pool and what its slices measured.
type target struct {
	url     string
	client  *fasthttp.HostClient
	mu      sync.Mutex
	samples []float64
	spent   time.Duration
	warmUp  int
	errors  int64
	late    int64
	first   string
}

type options struct {
	key     string
	body    []byte
	stream  bool
	clients int
	rate    float64
}

func newTarget(raw string, o options) *target {
	parsed, err := url.Parse(raw)
	if err != nil || parsed.Host == "" {
		log.Fatalf("-url %q: not an http URL", raw)
	}
	return &target{url: raw, client: &fasthttp.HostClient{
		Addr:                parsed.Host,
		MaxConns:            o.clients,
		StreamResponseBody:  o.stream,
		MaxIdleConnDuration: time.Minute,
		ReadTimeout:         30 * time.Second,
		WriteTimeout:        30 * time.Second,
	}}
}

// one sends a request and returns its latency: to the last byte, or with stream to the first chunk
// (the rest is read, untimed).
func (t *target) one(o options) (time.Duration, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(t.url)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("Authorization", "Bearer "+o.key)
	req.SetBodyRaw(o.body)
	started := time.Now()
	if err := t.client.Do(req, resp); err != nil {
		return 0, err
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		body := resp.Body()
		return 0, fmt.Errorf("%s: %d %s", t.url, resp.StatusCode(), body)
	}
	if !o.stream {
		return time.Since(started), nil
	}
	stream := resp.BodyStream()
	if stream == nil {
		return time.Since(started), nil // the whole body came at once
	}
	buffer := make([]byte, 4096)
	if _, err := stream.Read(buffer); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	elapsed := time.Since(started)
	_, err := io.Copy(io.Discard, stream)
	_ = resp.CloseBodyStream()
	return elapsed, err
}

func (t *target) record(latency time.Duration, err error, into *[]float64) {
	if err != nil {
		t.mu.Lock()
		t.errors++
		if t.first == "" {
			t.first = err.Error()
		}
		t.mu.Unlock()
		return
	}
	*into = append(*into, float64(latency.Microseconds())/1000)
}

// slice runs one slice against t until `until`; samples go to t unless warm-up.
func (t *target) slice(o options, until time.Time, seed int64, count bool) {
	var wg sync.WaitGroup
	collected := make([][]float64, o.clients)
	if o.rate <= 0 {
		for w := 0; w < o.clients; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for time.Now().Before(until) {
					latency, err := t.one(o)
					t.record(latency, err, &collected[w])
				}
			}(w)
		}
	} else {
		arrivals := make(chan struct{}, o.clients)
		for w := 0; w < o.clients; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for range arrivals {
					latency, err := t.one(o)
					t.record(latency, err, &collected[w])
				}
			}(w)
		}
		gaps := rand.New(rand.NewSource(seed))
		next := time.Now()
		var late int64
		for {
			next = next.Add(time.Duration(gaps.ExpFloat64() / o.rate * float64(time.Second)))
			if !next.Before(until) {
				break
			}
			time.Sleep(time.Until(next))
			select {
			case arrivals <- struct{}{}:
			default:
				late++
			}
		}
		close(arrivals)
		if count {
			atomic.AddInt64(&t.late, late)
		}
	}
	wg.Wait()
	for _, c := range collected {
		if count {
			t.samples = append(t.samples, c...)
		} else {
			t.warmUp += len(c)
		}
	}
}

func main() {
	var targets urls
	flag.Var(&targets, "url", "a URL to post to (twice: the two take turns)")
	key := flag.String("key", "", "API key, sent as Authorization: Bearer")
	seconds := flag.Float64("seconds", 16, "in all, every URL's slices together")
	sliceSeconds := flag.Float64("slice", 1, "seconds per slice")
	clients := flag.Int("clients", 64, "connections (and workers) per URL")
	rate := flag.Float64("rate", 0, "requests/s in all (paced); 0: saturated")
	stream := flag.Bool("stream", false, "ask for an SSE stream; latency to the first chunk")
	model := flag.String("model", "bench", "the body's model")
	seed := flag.Int64("seed", 0, "seed of the arrivals")
	out := flag.String("out", "", "where to write the JSON results")
	flag.Parse()
	if len(targets) != 2 || *out == "" {
		log.Fatal("give -url twice and -out")
	}
	body, _ := json.Marshal(map[string]any{
		"model": *model, "max_tokens": 4, "stream": *stream,
		"messages": []map[string]string{{"role": "user", "content": "how fast is the gateway"}},
	})
	o := options{key: *key, body: body, stream: *stream, clients: *clients, rate: *rate}
	pool := []*target{newTarget(targets[0], o), newTarget(targets[1], o)}
	for _, t := range pool {
		t.slice(o, time.Now().Add(warmUp), -1, false)
		if t.errors > 0 {
			log.Fatalf("warm-up of %s: %d errors, first: %s", t.url, t.errors, t.first)
		}
		t.errors, t.first = 0, ""
	}
	slices := max(2, int(*seconds / *sliceSeconds + 0.5))
	for n := 0; n < slices; n++ {
		t := pool[(n+n/2)%2] // A B B A A B ...
		started := time.Now()
		t.slice(o, started.Add(time.Duration(*sliceSeconds*float64(time.Second))), *seed*10_000+int64(n/2), true)
		t.spent += time.Since(started)
	}
	results := make([]map[string]any, 0, 2)
	for _, t := range pool {
		results = append(results, map[string]any{
			"url": t.url, "rps": float64(len(t.samples)) / t.spent.Seconds(), "latencies_ms": t.samples,
			"errors": t.errors, "late": t.late, "first_error": t.first, "warm_up": t.warmUp,
		})
	}
	data, _ := json.Marshal(results)
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		log.Fatal(err)
	}
}
