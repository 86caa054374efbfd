// kube-bench drives and times the real API server for the sync benchmark (bench/bench_sync.py),
// as a Go client would, so the reference figures measure the server and not a Python client
// sharing the benchmark's CPU and GIL. client-go's dynamic client, no client-side rate limit.
//
//	kube-bench -kubeconfig F -group G -version V -resource PLURAL -namespace NS MODE [flags]
//
// Modes (each prints one JSON object on stdout):
//
//   - list [-limit 500] [-rounds 3]: full paged lists (limit/continue), every page decoded into
//     unstructured objects (custom resources are served as JSON). {"objects", "seconds": [...]}
//   - create [-workers 8]: creates the objects read from stdin (one JSON object per line) with
//     that many concurrent writers: the rate the server sustains. {"objects", "seconds"}
//   - patch -names N -prefix P -rate R -seconds S [-workers 8]: merge-patches spec.cooldownPeriod
//     of P00000..P(N-1) in turn, write i started at start + i/R (open loop: a slow answer does
//     not delay the next write). {"writes": [[resourceVersion, unix seconds when the write
//     returned], ...], "late": writes started over 10 ms behind their schedule}
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "admin kubeconfig of the cluster")
	group := flag.String("group", "", "API group of the resource")
	version := flag.String("version", "", "API version of the resource")
	resource := flag.String("resource", "", "plural name of the resource")
	namespace := flag.String("namespace", "", "namespace")
	limit := flag.Int64("limit", 500, "list: page size")
	rounds := flag.Int("rounds", 3, "list: how many full lists to time")
	workers := flag.Int("workers", 8, "create, patch: concurrent writers")
	names := flag.Int("names", 0, "patch: how many objects to patch in turn")
	prefix := flag.String("prefix", "", "patch: object names are prefix%05d")
	rate := flag.Float64("rate", 100, "patch: writes per second")
	seconds := flag.Float64("seconds", 5, "patch: for how long")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	check(err)
	config.QPS, config.Burst = -1, 0 // no client-side rate limit: the server is what is measured
	client, err := dynamic.NewForConfig(config)
	check(err)
	objects := client.Resource(schema.GroupVersionResource{Group: *group, Version: *version, Resource: *resource}).
		Namespace(*namespace)

	var result any
	switch flag.Arg(0) {
	case "list":
		result = list(objects, *limit, *rounds)
	case "create":
		result = create(objects, *workers)
	case "patch":
		result = patch(objects, *names, *prefix, *rate, *seconds, *workers)
	default:
		check(fmt.Errorf("mode %q: want list, create or patch", flag.Arg(0)))
	}
	check(json.NewEncoder(os.Stdout).Encode(result))
}

func list(objects dynamic.ResourceInterface, limit int64, rounds int) map[string]any {
	count, timings := 0, make([]float64, 0, rounds)
	for round := 0; round < rounds; round++ {
		started, token := time.Now(), ""
		count = 0
		for {
			page, err := objects.List(context.Background(), metav1.ListOptions{Limit: limit, Continue: token})
			check(err)
			count += len(page.Items)
			if token = page.GetContinue(); token == "" {
				break
			}
		}
		timings = append(timings, time.Since(started).Seconds())
	}
	return map[string]any{"objects": count, "seconds": timings}
}

func create(objects dynamic.ResourceInterface, workers int) map[string]any {
	var bodies []*unstructured.Unstructured
	scanner := bufio.NewScanner(os.Stdin)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		body := &unstructured.Unstructured{}
		check(body.UnmarshalJSON(scanner.Bytes()))
		bodies = append(bodies, body)
	}
	check(scanner.Err())
	started := time.Now()
	work := make(chan *unstructured.Unstructured)
	var wait sync.WaitGroup
	for range workers {
		wait.Add(1)
		go func() {
			defer wait.Done()
			for body := range work {
				_, err := objects.Create(context.Background(), body, metav1.CreateOptions{})
				check(err)
			}
		}()
	}
	for _, body := range bodies {
		work <- body
	}
	close(work)
	wait.Wait()
	return map[string]any{"objects": len(bodies), "seconds": time.Since(started).Seconds()}
}

func patch(objects dynamic.ResourceInterface, names int, prefix string, rate, seconds float64, workers int) map[string]any {
	total := int(rate * seconds)
	writes := make([][2]any, total)
	late := 0
	var mutex sync.Mutex
	work := make(chan int, total)
	var wait sync.WaitGroup
	started := time.Now()
	for range workers {
		wait.Add(1)
		go func() {
			defer wait.Done()
			for i := range work {
				due := started.Add(time.Duration(float64(i) / rate * float64(time.Second)))
				if delay := time.Until(due); delay > 0 {
					time.Sleep(delay)
				} else if delay < -10*time.Millisecond {
					mutex.Lock()
					late++
					mutex.Unlock()
				}
				body := fmt.Sprintf(`{"spec":{"cooldownPeriod":"%ds"}}`, i+1) // never a value already set: each write is an event
				object, err := objects.Patch(context.Background(), fmt.Sprintf("%s%05d", prefix, i%names),
					types.MergePatchType, []byte(body), metav1.PatchOptions{})
				check(err)
				returned := float64(time.Now().UnixNano()) / 1e9
				writes[i] = [2]any{object.GetResourceVersion(), returned}
			}
		}()
	}
	for i := range total {
		work <- i
	}
	close(work)
	wait.Wait()
	return map[string]any{"writes": writes, "late": late}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "kube-bench:", err)
		os.Exit(1)
	}
}
